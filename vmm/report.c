// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

static const char *node_name(const struct ivm_calltree_node *n,
			     const struct ivm_report_options *opts,
			     char *buf, size_t len)
{
	const char *name = NULL;

	switch (n->type) {
	case IVM_NODE_ROOT:
		return "all";
	case IVM_NODE_PROCESS:
		if (n->comm[0])
			snprintf(buf, len, "%s [%" PRIu64 "]", n->comm, n->key);
		else
			snprintf(buf, len, "pid %" PRIu64, n->key);
		return buf;
	case IVM_NODE_THREAD:
		snprintf(buf, len, "%s/%" PRIu64, n->comm[0] ? n->comm : "?",
			 n->key);
		return buf;
	case IVM_NODE_USER:
	case IVM_NODE_KERNEL:
		if (opts->sym.name)
			name = opts->sym.name(opts->sym.ctx, n->type, n->key,
					      buf, len);
		if (!name) {
			snprintf(buf, len, "0x%" PRIx64 "%s", n->key,
				 n->type == IVM_NODE_KERNEL ? "_[k]" : "");
			name = buf;
		}
		return name;
	}
	return "?";
}

struct leaf {
	uint32_t node;
	uint64_t count;
};

static int leaf_cmp(const void *a, const void *b)
{
	const struct leaf *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return x->node < y->node ? -1 : x->node > y->node;
}

/* Nodes where samples of kind end, most frequent first; caller frees. */
static struct leaf *leaves_of(const struct ivm_calltree *tree, int kind,
			      size_t *nr)
{
	uint32_t i, n = ivm_calltree_nr_nodes(tree);
	struct leaf *leaves = calloc(n ? n : 1, sizeof(*leaves));

	*nr = 0;
	if (!leaves)
		return NULL;
	for (i = 0; i < n; i++) {
		const struct ivm_calltree_node *node = ivm_calltree_node(tree, i);

		if (node->self[kind]) {
			leaves[*nr].node = i;
			leaves[*nr].count = node->self[kind];
			(*nr)++;
		}
	}
	qsort(leaves, *nr, sizeof(*leaves), leaf_cmp);
	return leaves;
}

static const char *kind_title(int kind)
{
	switch (kind) {
	case IVM_SAMPLE_TO_IDLE:
		return "to-idle";
	case IVM_SAMPLE_FROM_IDLE:
		return "from-idle";
	default:
		return "on-cpu";
	}
}

void ivm_report_text(const struct ivm_calltree *tree,
		     const struct ivm_report_options *opts)
{
	FILE *out = opts->out;
	char buf[512];
	int kind;

	for (kind = 0; kind < IVM_SAMPLE_NR_KINDS; kind++) {
		uint64_t total = ivm_calltree_total(tree, kind);
		struct leaf *leaves;
		size_t nr, i;

		if (opts->kind >= 0 && opts->kind != kind)
			continue;
		if (!total && opts->kind < 0)
			continue;
		fprintf(out, "\n== top %s stacks (%" PRIu64 " samples) ==\n",
			kind_title(kind), total);
		leaves = leaves_of(tree, kind, &nr);
		if (!leaves) {
			fprintf(out, "  (out of memory)\n");
			continue;
		}
		for (i = 0; i < nr && i < opts->top; i++) {
			uint32_t idx = leaves[i].node;
			const struct ivm_calltree_node *n;

			fprintf(out, "\n%6.2f%%  %" PRIu64 " samples\n",
				100.0 * (double)leaves[i].count / (double)total,
				leaves[i].count);
			/* Leaf first, like perf and /proc/PID/stack. */
			while (idx != 0 && idx != IVM_CALLTREE_NONE) {
				n = ivm_calltree_node(tree, idx);
				fprintf(out, "          %s%s\n",
					node_name(n, opts, buf, sizeof(buf)),
					n->type == IVM_NODE_PROCESS ?
						"  (process)" :
					n->type == IVM_NODE_THREAD ?
						"  (thread)" : "");
				idx = n->parent;
			}
		}
		if (nr > opts->top)
			fprintf(out, "\n  ... %zu more distinct stacks\n",
				nr - opts->top);
		free(leaves);
	}
}

void ivm_report_folded(const struct ivm_calltree *tree,
		       const struct ivm_report_options *opts)
{
	uint32_t path[2 + 2 * IVM_SAMPLE_MAX_FRAMES + 2];
	char buf[512];
	int kind;

	for (kind = 0; kind < IVM_SAMPLE_NR_KINDS; kind++) {
		struct leaf *leaves;
		size_t nr, i;

		if (opts->kind >= 0 && opts->kind != kind)
			continue;
		leaves = leaves_of(tree, kind, &nr);
		if (!leaves)
			continue;
		for (i = 0; i < nr; i++) {
			uint32_t idx = leaves[i].node, depth = 0;
			bool first = true;

			while (idx != 0 && idx != IVM_CALLTREE_NONE &&
			       depth < sizeof(path) / sizeof(path[0])) {
				path[depth++] = idx;
				idx = ivm_calltree_node(tree, idx)->parent;
			}
			if (opts->kind < 0) {
				fputs(ivm_sample_kind_name(kind), opts->out);
				first = false;
			}
			while (depth--) {
				const char *name = node_name(
					ivm_calltree_node(tree, path[depth]),
					opts, buf, sizeof(buf));

				if (!first)
					fputc(';', opts->out);
				first = false;
				/* ';' and ' ' separate folded fields. */
				for (; *name; name++)
					fputc(*name == ';' || *name == ' ' ?
					      '_' : *name, opts->out);
			}
			fprintf(opts->out, " %" PRIu64 "\n", leaves[i].count);
		}
		free(leaves);
	}
}
