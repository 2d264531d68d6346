// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/text_safe.h"
#include "report/report.h"

const char *ivm_report_task_name(const struct ivm_calltree_node *n, char *buf,
				 size_t len)
{
	char comm[IVM_TEXT_SAFE_SIZE(sizeof(n->comm))];

	/* The guest names its threads: any bytes at all (text_safe.h). */
	ivm_text_safe_n(comm, sizeof(comm), n->comm, sizeof(n->comm));
	if (n->type == IVM_NODE_PROCESS) {
		if (comm[0])
			snprintf(buf, len, "%s [%" PRIu64 "]", comm, n->key);
		else
			snprintf(buf, len, "pid %" PRIu64, n->key);
	} else {
		snprintf(buf, len, "%s/%" PRIu64, comm[0] ? comm : "?", n->key);
	}
	return buf;
}

const char *ivm_report_frame_name(const struct ivm_report_frame *f,
				  bool decorate, char *buf, size_t len)
{
	const char *k = decorate && f->type == IVM_NODE_KERNEL ? "_[k]" : "";

	size_t n;

	/* Symbols of guest binaries (and a guest's own kallsyms) are the
	 * guest's words. */
	if (f->function) {
		ivm_text_safe(buf, len, f->function);
		n = strlen(buf);
		snprintf(buf + n, len - n, "%s", k);
	} else
		snprintf(buf, len, "0x%" PRIx64 "%s",
			 f->type == IVM_NODE_USER ? IVM_REPORT_USER_PC(f->pc) :
						    f->pc, k);
	return buf;
}

size_t ivm_report_stack(const struct ivm_calltree *tree,
			const struct ivm_report_options *opts, uint32_t leaf,
			struct ivm_report_frame *out, size_t max,
			uint32_t *process, uint32_t *thread)
{
	uint32_t idx = leaf, steps = 0;
	size_t n = 0;

	*process = *thread = IVM_CALLTREE_NONE;
	/* limit iterations so a malformed tree cannot loop */
	while (idx != 0 && idx != IVM_CALLTREE_NONE &&
	       idx < ivm_calltree_nr_nodes(tree) && steps++ < 4096) {
		const struct ivm_calltree_node *node =
			ivm_calltree_node(tree, idx);
		unsigned int got = 0, i, room;

		idx = node->parent;
		if (node->type == IVM_NODE_PROCESS) {
			*process = (uint32_t)(node - ivm_calltree_node(tree, 0));
			continue;
		}
		if (node->type == IVM_NODE_THREAD) {
			*thread = (uint32_t)(node - ivm_calltree_node(tree, 0));
			continue;
		}
		if (node->type != IVM_NODE_USER && node->type != IVM_NODE_KERNEL)
			continue;
		if (n == max)
			continue;
		room = max - n < IVM_REPORT_MAX_INLINE ?
		       (unsigned int)(max - n) : IVM_REPORT_MAX_INLINE;
		if (opts->sym.frames)
			got = opts->sym.frames(opts->sym.ctx, node->type,
					       node->key,
					       node->pc_flags & IVM_PC_EXACT,
					       out + n, room);
		if (got > room)
			got = room;
		if (!got) {
			out[n] = (struct ivm_report_frame){ .pc = node->key };
			got = 1;
		}
		for (i = 0; i < got; i++) {
			out[n + i].type = node->type;
			out[n + i].pc = node->key;
			out[n + i].exact = node->pc_flags & IVM_PC_EXACT;
		}
		n += got;
	}
	return n;
}

void ivm_report_context_of(const struct ivm_calltree *tree, uint32_t leaf,
			   struct ivm_report_context *ret)
{
	uint32_t idx = leaf, steps = 0;

	ret->group = ret->process = ret->thread = ret->labels =
		IVM_CALLTREE_NONE;
	/* limit iterations so a malformed tree cannot loop */
	while (idx != 0 && idx != IVM_CALLTREE_NONE &&
	       idx < ivm_calltree_nr_nodes(tree) && steps++ < 4096) {
		const struct ivm_calltree_node *node =
			ivm_calltree_node(tree, idx);

		switch (node->type) {
		case IVM_NODE_GROUP:
			ret->group = idx;
			break;
		case IVM_NODE_PROCESS:
			ret->process = idx;
			break;
		case IVM_NODE_THREAD:
			ret->thread = idx;
			break;
		case IVM_NODE_LABELS:
			ret->labels = idx;
			break;
		default:
			break;
		}
		idx = node->parent;
	}
}

const char *ivm_report_group_name(const struct ivm_calltree *tree,
				  uint32_t node, char *buf, size_t len)
{
	return ivm_text_safe(buf, len, ivm_calltree_string(
		tree, (uint32_t)ivm_calltree_node(tree, node)->key));
}

size_t ivm_report_nr_labels(const struct ivm_calltree *tree, uint32_t node)
{
	size_t nr;

	ivm_calltree_labels(tree, ivm_calltree_node(tree, node)->key, &nr);
	return nr;
}

const char *ivm_report_label_name(const struct ivm_calltree *tree,
				  uint32_t node, size_t i, char *buf,
				  size_t len)
{
	size_t nr;
	const struct ivm_label *l = ivm_calltree_labels(
		tree, ivm_calltree_node(tree, node)->key, &nr);

	if (i < nr) {
		/* The key is the user's, the value the guest's. */
		size_t n;

		snprintf(buf, len, "%s=", l[i].key);
		n = strlen(buf);
		ivm_text_safe(buf + n, len - n, l[i].value);
	} else
		snprintf(buf, len, "?");
	return buf;
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

bool ivm_report_value_parse(const char *s, enum ivm_report_value *ret)
{
	if (!strcmp(s, "count"))
		*ret = IVM_VALUE_COUNT;
	else if (!strcmp(s, "idle_time"))
		*ret = IVM_VALUE_IDLE_TIME;
	else if (!strcmp(s, "wake_delay"))
		*ret = IVM_VALUE_WAKE_DELAY;
	else
		return false;
	return true;
}

int ivm_report_value_kind(enum ivm_report_value v)
{
	switch (v) {
	case IVM_VALUE_IDLE_TIME:
		return IVM_SAMPLE_TO_IDLE;
	case IVM_VALUE_WAKE_DELAY:
		return IVM_SAMPLE_FROM_IDLE;
	default:
		return -1;
	}
}

/* A weight as the text report prints it: a count, or milliseconds. */
static const char *weight(enum ivm_report_value v, uint64_t w, char *buf,
			  size_t size)
{
	if (v == IVM_VALUE_COUNT)
		snprintf(buf, size, "%" PRIu64, w);
	else
		snprintf(buf, size, "%.3f ms", (double)w / 1e6);
	return buf;
}

/* Nodes where samples of kind end, heaviest first; caller frees. */
static struct leaf *leaves_of(const struct ivm_calltree *tree, int kind,
			      enum ivm_report_value v, size_t *nr)
{
	uint32_t i, n = ivm_calltree_nr_nodes(tree);
	struct leaf *leaves = calloc(n ? n : 1, sizeof(*leaves));

	*nr = 0;
	if (!leaves)
		return NULL;
	for (i = 0; i < n; i++) {
		const struct ivm_calltree_node *node = ivm_calltree_node(tree, i);

		if (ivm_report_self(node, kind, v)) {
			leaves[*nr].node = i;
			leaves[*nr].count = ivm_report_self(node, kind, v);
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
	case IVM_SAMPLE_SWITCH:
		return "switch";
	default:
		return "on-cpu";
	}
}

static void print_frame(FILE *out, const struct ivm_report_frame *f)
{
	char buf[512];

	fprintf(out, "          %s%s", ivm_report_frame_name(f, true, buf,
							 sizeof(buf)),
		f->inlined ? "  (inlined)" : "");
	if (f->file)
		fprintf(out, "  %s:%u", ivm_text_safe(buf, sizeof(buf), f->file),
			f->line);
	fputc('\n', out);
}

/*
 * The tree's groups (the root's GROUP children) by their samples of kind,
 * most first: the top level of the tree in one table.
 */
static void print_groups(const struct ivm_calltree *tree,
			 const struct ivm_report_options *opts, int kind)
{
	const struct ivm_calltree_node *root = ivm_calltree_node(tree, 0);
	enum ivm_report_value v = opts->value;
	uint64_t total = ivm_report_total(root, kind, v);
	struct leaf *groups;
	uint32_t c;
	size_t nr = 0, i;
	char buf[512], w[32];

	if (root->first_child == IVM_CALLTREE_NONE ||
	    ivm_calltree_node(tree, root->first_child)->type != IVM_NODE_GROUP)
		return;
	groups = calloc(ivm_calltree_nr_nodes(tree), sizeof(*groups));
	if (!groups)
		return;
	for (c = root->first_child; c != IVM_CALLTREE_NONE;
	     c = ivm_calltree_node(tree, c)->next_sibling)
		if (ivm_report_total(ivm_calltree_node(tree, c), kind, v))
			groups[nr++] = (struct leaf){
				c, ivm_report_total(ivm_calltree_node(tree, c),
						    kind, v) };
	qsort(groups, nr, sizeof(*groups), leaf_cmp);
	fprintf(opts->out, "\n== %s samples by %s ==\n\n", kind_title(kind),
		ivm_calltree_group_name(tree));
	for (i = 0; i < nr; i++)
		fprintf(opts->out, "%6.2f%%  %8s  %s\n",
			100.0 * (double)groups[i].count / (double)total,
			weight(v, groups[i].count, w, sizeof(w)),
			ivm_report_group_name(tree, groups[i].node, buf,
					      sizeof(buf)));
	free(groups);
}

void ivm_report_text(const struct ivm_calltree *tree,
		     const struct ivm_report_options *opts)
{
	FILE *out = opts->out;
	enum ivm_report_value v = opts->value;
	struct ivm_report_frame *frames;
	char buf[512], w[32];
	int kind;

	frames = calloc(IVM_REPORT_MAX_STACK, sizeof(*frames));
	if (!frames) {
		fprintf(out, "(out of memory)\n");
		return;
	}
	for (kind = 0; kind < IVM_SAMPLE_NR_KINDS; kind++) {
		uint64_t total = ivm_report_total(ivm_calltree_node(tree, 0),
						  kind, v);
		struct leaf *leaves;
		size_t nr, i;

		if (opts->kind >= 0 && opts->kind != kind)
			continue;
		if (!total && opts->kind < 0)
			continue;
		if (total)
			print_groups(tree, opts, kind);
		if (v == IVM_VALUE_COUNT)
			fprintf(out, "\n== top %s stacks (%" PRIu64
				" samples) ==\n", kind_title(kind), total);
		else
			fprintf(out, "\n== top %s stacks by %s (%.3f s in %"
				PRIu64 " of %" PRIu64 " samples) ==\n",
				kind_title(kind), v == IVM_VALUE_IDLE_TIME ?
				"idle time" : "host wake delay",
				(double)total / 1e9,
				ivm_calltree_timed(tree, kind),
				ivm_calltree_total(tree, kind));
		leaves = leaves_of(tree, kind, v, &nr);
		if (!leaves) {
			fprintf(out, "  (out of memory)\n");
			continue;
		}
		for (i = 0; i < nr && i < opts->top; i++) {
			struct ivm_report_context ctx;
			uint32_t process, thread;
			size_t n, j;

			fprintf(out, "\n%6.2f%%  %s%s\n",
				100.0 * (double)leaves[i].count / (double)total,
				weight(v, leaves[i].count, w, sizeof(w)),
				v == IVM_VALUE_COUNT ? " samples" : "");
			/* Leaf first, like perf and /proc/PID/stack. */
			n = ivm_report_stack(tree, opts, leaves[i].node, frames,
					     IVM_REPORT_MAX_STACK, &process,
					     &thread);
			for (j = 0; j < n; j++)
				print_frame(out, &frames[j]);
			ivm_report_context_of(tree, leaves[i].node, &ctx);
			for (j = 0; ctx.labels != IVM_CALLTREE_NONE &&
			     j < ivm_report_nr_labels(tree, ctx.labels); j++)
				fprintf(out, "          %s  (label)\n",
					ivm_report_label_name(tree, ctx.labels,
							      j, buf,
							      sizeof(buf)));
			if (thread != IVM_CALLTREE_NONE)
				fprintf(out, "          %s  (thread)\n",
					ivm_report_task_name(
						ivm_calltree_node(tree, thread),
						buf, sizeof(buf)));
			if (process != IVM_CALLTREE_NONE)
				fprintf(out, "          %s  (process)\n",
					ivm_report_task_name(
						ivm_calltree_node(tree, process),
						buf, sizeof(buf)));
			if (ctx.group != IVM_CALLTREE_NONE)
				fprintf(out, "          %s  (%s)\n",
					ivm_report_group_name(tree, ctx.group,
							      buf, sizeof(buf)),
					ivm_calltree_group_name(tree));
		}
		if (nr > opts->top)
			fprintf(out, "\n  ... %zu more distinct stacks\n",
				nr - opts->top);
		free(leaves);
	}
	free(frames);
}

static void put_folded(FILE *out, const char *name, bool *first)
{
	if (!*first)
		fputc(';', out);
	*first = false;
	/* ';' and ' ' separate folded fields. */
	for (; *name; name++)
		fputc(*name == ';' || *name == ' ' ? '_' : *name, out);
}

void ivm_report_folded(const struct ivm_calltree *tree,
		       const struct ivm_report_options *opts)
{
	struct ivm_report_frame *frames;
	char buf[512];
	int kind;

	frames = calloc(IVM_REPORT_MAX_STACK, sizeof(*frames));
	if (!frames)
		return;
	for (kind = 0; kind < IVM_SAMPLE_NR_KINDS; kind++) {
		struct leaf *leaves;
		size_t nr, i;

		if (opts->kind >= 0 && opts->kind != kind)
			continue;
		leaves = leaves_of(tree, kind, opts->value, &nr);
		if (!leaves)
			continue;
		for (i = 0; i < nr; i++) {
			struct ivm_report_context ctx;
			uint32_t process, thread;
			bool first = true;
			size_t n, j;

			n = ivm_report_stack(tree, opts, leaves[i].node, frames,
					     IVM_REPORT_MAX_STACK, &process,
					     &thread);
			ivm_report_context_of(tree, leaves[i].node, &ctx);
			if (opts->kind < 0)
				put_folded(opts->out, ivm_sample_kind_name(kind),
					   &first);
			if (ctx.group != IVM_CALLTREE_NONE)
				put_folded(opts->out, ivm_report_group_name(
					tree, ctx.group, buf, sizeof(buf)),
					&first);
			if (process != IVM_CALLTREE_NONE)
				put_folded(opts->out, ivm_report_task_name(
					ivm_calltree_node(tree, process), buf,
					sizeof(buf)), &first);
			if (thread != IVM_CALLTREE_NONE)
				put_folded(opts->out, ivm_report_task_name(
					ivm_calltree_node(tree, thread), buf,
					sizeof(buf)), &first);
			for (j = 0; ctx.labels != IVM_CALLTREE_NONE &&
			     j < ivm_report_nr_labels(tree, ctx.labels); j++)
				put_folded(opts->out, ivm_report_label_name(
					tree, ctx.labels, j, buf, sizeof(buf)),
					&first);
			while (n--) {
				size_t l;

				ivm_report_frame_name(&frames[n], true, buf,
						      sizeof(buf) - 8);
				l = strlen(buf);
				if (frames[n].inlined)
					snprintf(buf + l, sizeof(buf) - l, "_[i]");
				put_folded(opts->out, buf, &first);
			}
			fprintf(opts->out, " %" PRIu64 "\n", leaves[i].count);
		}
		free(leaves);
	}
	free(frames);
}
