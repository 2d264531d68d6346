// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "report/calltree.h"

/*
 * Children are found through one open-addressing hash table keyed by
 * (parent, type, key) rather than by walking sibling lists: a kernel entry
 * point such as entry_SYSCALL_64 can have hundreds of children.
 */
struct ivm_calltree {
	unsigned int grouping;
	enum ivm_group_by by;
	char *group_label;		/* IVM_GROUP_BY_LABEL */
	char *dims[IVM_SAMPLE_MAX_LABELS];
	size_t nr_dims;
	struct ivm_calltree_node *nodes;
	uint32_t nr, cap;
	uint32_t *slots;	/* node index + 1; 0 = empty */
	uint32_t nr_slots;	/* power of two */
	/* Strings by id (id 0 is ""), found by hash. */
	char **strings;
	uint32_t nr_strings, cap_strings;
	uint32_t *string_slots;	/* id; 0 = empty */
	uint32_t nr_string_slots;	/* power of two, or 0 */
	/* Sets of dimension labels: nr_dims labels each, in one array. */
	struct ivm_label *label_sets;
	uint32_t nr_label_sets;
	uint64_t timed[IVM_SAMPLE_NR_KINDS];	/* samples with a time value */
};

static uint64_t hash_key(uint32_t parent, enum ivm_node_type type,
			 uint64_t key, uint8_t pc_flags)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull;

	h ^= ((uint64_t)parent << 4 | (uint64_t)pc_flags << 3 |
	      (uint64_t)type) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	return h;
}

static struct ivm_error *grow_slots(struct ivm_calltree *tree)
{
	uint32_t nr_slots = tree->nr_slots ? tree->nr_slots * 2 : 1024;
	uint32_t *slots, i;

	if (nr_slots < tree->nr_slots)
		return &ivm_enomem;
	slots = calloc(nr_slots, sizeof(*slots));
	if (!slots)
		return &ivm_enomem;
	for (i = 1; i < tree->nr; i++) {
		const struct ivm_calltree_node *n = &tree->nodes[i];
		uint64_t h = hash_key(n->parent, n->type, n->key, n->pc_flags);
		uint32_t s = (uint32_t)h & (nr_slots - 1);

		while (slots[s])
			s = (s + 1) & (nr_slots - 1);
		slots[s] = i + 1;
	}
	free(tree->slots);
	tree->slots = slots;
	tree->nr_slots = nr_slots;
	return NULL;
}

static struct ivm_error *new_node(struct ivm_calltree *tree, uint32_t parent,
				  enum ivm_node_type type, uint64_t key,
				  uint8_t pc_flags, uint32_t *ret)
{
	struct ivm_calltree_node *n;

	if (tree->nr == tree->cap) {
		uint32_t cap = tree->cap ? tree->cap * 2 : 1024;

		/* Node indexes are u32 with UINT32_MAX reserved. */
		if (cap < tree->cap || cap == IVM_CALLTREE_NONE)
			return &ivm_enomem;
		n = realloc(tree->nodes, cap * sizeof(*n));
		if (!n)
			return &ivm_enomem;
		tree->nodes = n;
		tree->cap = cap;
	}
	n = &tree->nodes[tree->nr];
	memset(n, 0, sizeof(*n));
	n->parent = parent;
	n->first_child = IVM_CALLTREE_NONE;
	n->next_sibling = IVM_CALLTREE_NONE;
	n->type = type;
	n->key = key;
	n->pc_flags = pc_flags;
	if (parent != IVM_CALLTREE_NONE) {
		struct ivm_calltree_node *p = &tree->nodes[parent];

		n->depth = p->depth + 1;
		n->next_sibling = p->first_child;
		p->first_child = tree->nr;
	}
	*ret = tree->nr++;
	return NULL;
}

struct ivm_error *ivm_calltree_create(unsigned int grouping,
				      struct ivm_calltree **ret)
{
	struct ivm_calltree *tree = calloc(1, sizeof(*tree));
	struct ivm_error *err;
	uint32_t root;

	if (!tree)
		return &ivm_enomem;
	tree->grouping = grouping;
	tree->by = grouping & IVM_CALLTREE_BY_THREAD ? IVM_GROUP_BY_THREAD :
		   IVM_GROUP_BY_PROCESS;
	err = new_node(tree, IVM_CALLTREE_NONE, IVM_NODE_ROOT, 0, 0, &root);
	if (!err)
		err = grow_slots(tree);
	if (err) {
		ivm_calltree_destroy(tree);
		return err;
	}
	*ret = tree;
	return NULL;
}

void ivm_calltree_destroy(struct ivm_calltree *tree)
{
	uint32_t i;

	if (!tree)
		return;
	free(tree->nodes);
	free(tree->slots);
	for (i = 0; i < tree->nr_strings; i++)
		free(tree->strings[i]);
	free(tree->strings);
	free(tree->string_slots);
	free(tree->label_sets);
	free(tree->group_label);
	for (i = 0; i < tree->nr_dims; i++)
		free(tree->dims[i]);
	free(tree);
}

struct ivm_error *ivm_group_by_parse(const char *s, enum ivm_group_by *by,
				     const char **label)
{
	*label = NULL;
	if (!strcmp(s, "thread"))
		*by = IVM_GROUP_BY_THREAD;
	else if (!strcmp(s, "process"))
		*by = IVM_GROUP_BY_PROCESS;
	else if (!strcmp(s, "comm"))
		*by = IVM_GROUP_BY_COMM;
	else if (!strcmp(s, "title"))
		*by = IVM_GROUP_BY_TITLE;
	else if (!strncmp(s, "label:", 6) && s[6]) {
		*by = IVM_GROUP_BY_LABEL;
		*label = s + 6;
	} else
		return ivm_error_create(IVM_ERROR_INVALID,
					"unknown grouping '%s' (thread, process, comm, title, label:KEY)",
					s);
	return NULL;
}

const char *ivm_calltree_group_name(const struct ivm_calltree *tree)
{
	switch (tree->by) {
	case IVM_GROUP_BY_THREAD:
		return "thread";
	case IVM_GROUP_BY_PROCESS:
		return "process";
	case IVM_GROUP_BY_COMM:
		return "comm";
	case IVM_GROUP_BY_TITLE:
		return "title";
	default:
		return tree->group_label;
	}
}

struct ivm_error *ivm_calltree_group_by(struct ivm_calltree *tree,
					enum ivm_group_by by,
					const char *label)
{
	char *copy = NULL;

	if (tree->nr > 1)
		return ivm_error_create(IVM_ERROR_INVALID,
					"grouping set after samples");
	if (by == IVM_GROUP_BY_LABEL) {
		if (!label || !*label)
			return ivm_error_create(IVM_ERROR_INVALID,
						"grouping by a label needs its key");
		copy = strdup(label);
		if (!copy)
			return &ivm_enomem;
	}
	free(tree->group_label);
	tree->group_label = copy;
	tree->by = by;
	tree->grouping = by == IVM_GROUP_BY_THREAD ?
			 IVM_CALLTREE_BY_PROCESS | IVM_CALLTREE_BY_THREAD :
			 by == IVM_GROUP_BY_PROCESS ? IVM_CALLTREE_BY_PROCESS : 0;
	return NULL;
}

struct ivm_error *ivm_calltree_set_dimensions(struct ivm_calltree *tree,
					      const char *const *keys,
					      size_t nr)
{
	size_t i;

	if (tree->nr > 1)
		return ivm_error_create(IVM_ERROR_INVALID,
					"dimensions set after samples");
	if (nr > IVM_SAMPLE_MAX_LABELS)
		nr = IVM_SAMPLE_MAX_LABELS;
	for (i = 0; i < tree->nr_dims; i++)
		free(tree->dims[i]);
	tree->nr_dims = 0;
	for (i = 0; i < nr; i++) {
		tree->dims[i] = strdup(keys[i]);
		if (!tree->dims[i])
			return &ivm_enomem;
		tree->nr_dims++;
	}
	return NULL;
}

static struct ivm_error *grow_strings(struct ivm_calltree *tree)
{
	uint32_t n = tree->nr_string_slots ? tree->nr_string_slots * 2 : 256;
	uint32_t *slots, i;

	if (n < tree->nr_string_slots)
		return &ivm_enomem;
	slots = calloc(n, sizeof(*slots));
	if (!slots)
		return &ivm_enomem;
	for (i = 1; i < tree->nr_strings; i++) {
		uint32_t s = (uint32_t)ivm_hash_string(tree->strings[i]) & (n - 1);

		while (slots[s])
			s = (s + 1) & (n - 1);
		slots[s] = i;
	}
	free(tree->string_slots);
	tree->string_slots = slots;
	tree->nr_string_slots = n;
	return NULL;
}

/* The id of str, added when new; 0 for "" or NULL. */
static struct ivm_error *string_id(struct ivm_calltree *tree, const char *str,
				   uint32_t *ret)
{
	struct ivm_error *err;
	uint32_t s;

	*ret = 0;
	if (!str || !*str)
		return NULL;
	if (!tree->nr_strings) {
		/* Id 0 is "". */
		tree->strings = calloc(16, sizeof(*tree->strings));
		if (!tree->strings || !(tree->strings[0] = strdup("")))
			return &ivm_enomem;
		tree->cap_strings = 16;
		tree->nr_strings = 1;
	}
	if (!tree->nr_string_slots ||
	    (uint64_t)tree->nr_strings * 2 >= tree->nr_string_slots) {
		err = grow_strings(tree);
		if (err)
			return err;
	}
	s = (uint32_t)ivm_hash_string(str) & (tree->nr_string_slots - 1);
	while (tree->string_slots[s]) {
		if (!strcmp(tree->strings[tree->string_slots[s]], str)) {
			*ret = tree->string_slots[s];
			return NULL;
		}
		s = (s + 1) & (tree->nr_string_slots - 1);
	}
	if (tree->nr_strings == tree->cap_strings) {
		char **n = realloc(tree->strings, 2 * tree->cap_strings *
						  sizeof(*n));

		if (!n)
			return &ivm_enomem;
		tree->strings = n;
		tree->cap_strings *= 2;
	}
	tree->strings[tree->nr_strings] = strdup(str);
	if (!tree->strings[tree->nr_strings])
		return &ivm_enomem;
	tree->string_slots[s] = tree->nr_strings;
	*ret = tree->nr_strings++;
	return NULL;
}

const char *ivm_calltree_string(const struct ivm_calltree *tree, uint32_t id)
{
	return id && id < tree->nr_strings ? tree->strings[id] : "";
}

const struct ivm_label *ivm_calltree_labels(const struct ivm_calltree *tree,
					    uint64_t id, size_t *nr)
{
	if (id >= tree->nr_label_sets) {
		*nr = 0;
		return NULL;
	}
	*nr = tree->nr_dims;
	return tree->label_sets + id * tree->nr_dims;
}

/* The value of label key in s, or NULL. */
static const char *label_value(const struct ivm_sample *s, const char *key)
{
	uint16_t i;

	for (i = 0; i < s->nr_labels; i++)
		if (!strcmp(s->labels[i].key, key))
			return s->labels[i].value;
	return NULL;
}

/*
 * The id of s's set of dimension labels, added when new.  Sets are few
 * (the distinct values a profile saw), so a linear search will do.
 */
static struct ivm_error *label_set_id(struct ivm_calltree *tree,
				      const struct ivm_sample *s,
				      uint64_t *ret)
{
	struct ivm_label set[IVM_SAMPLE_MAX_LABELS];
	struct ivm_label *sets;
	struct ivm_error *err;
	uint32_t i, id;
	size_t k, d = tree->nr_dims;

	for (k = 0; k < d; k++) {
		const char *v = label_value(s, tree->dims[k]);

		err = string_id(tree, v && *v ? v : "-", &id);
		if (err)
			return err;
		set[k] = (struct ivm_label){ tree->dims[k], tree->strings[id] };
	}
	for (i = 0; i < tree->nr_label_sets; i++) {
		for (k = 0; k < d; k++)
			if (tree->label_sets[i * d + k].value != set[k].value)
				break;
		if (k == d) {
			*ret = i;
			return NULL;
		}
	}
	if (tree->nr_label_sets == UINT32_MAX / IVM_SAMPLE_MAX_LABELS)
		return &ivm_enomem;
	sets = realloc(tree->label_sets,
		       (tree->nr_label_sets + 1) * d * sizeof(*sets));
	if (!sets)
		return &ivm_enomem;
	tree->label_sets = sets;
	memcpy(sets + tree->nr_label_sets * d, set, d * sizeof(*set));
	*ret = tree->nr_label_sets++;
	return NULL;
}

/* The name of s's group for the GROUP node, into buf. */
static const char *group_of(const struct ivm_calltree *tree,
			    const struct ivm_sample *s,
			    const struct ivm_calltree_context *ctx,
			    char *buf, size_t size)
{
	const char *v;

	switch (tree->by) {
	case IVM_GROUP_BY_COMM:
		return ctx && ctx->process_comm && *ctx->process_comm ?
		       ctx->process_comm : s->comm;
	case IVM_GROUP_BY_TITLE:
		if (ctx && ctx->title && *ctx->title)
			return ctx->title;
		snprintf(buf, size, "[%s]", ctx && ctx->process_comm &&
			 *ctx->process_comm ? ctx->process_comm : s->comm);
		return buf;
	default:
		v = label_value(s, tree->group_label);
		return v && *v ? v : "-";
	}
}

/* The child of parent with (type, key, pc_flags), created if missing. */
static struct ivm_error *child_pc(struct ivm_calltree *tree, uint32_t parent,
				  enum ivm_node_type type, uint64_t key,
				  uint8_t pc_flags, uint32_t *ret)
{
	uint64_t h = hash_key(parent, type, key, pc_flags);
	uint32_t s = (uint32_t)h & (tree->nr_slots - 1);
	struct ivm_error *err;

	while (tree->slots[s]) {
		const struct ivm_calltree_node *n =
			&tree->nodes[tree->slots[s] - 1];

		if (n->parent == parent && n->type == type && n->key == key &&
		    n->pc_flags == pc_flags) {
			*ret = tree->slots[s] - 1;
			return NULL;
		}
		s = (s + 1) & (tree->nr_slots - 1);
	}
	err = new_node(tree, parent, type, key, pc_flags, ret);
	if (err)
		return err;
	tree->slots[s] = *ret + 1;
	/* Keep the load factor under 1/2 so probes stay short. */
	if ((uint64_t)tree->nr * 2 > tree->nr_slots)
		return grow_slots(tree);
	return NULL;
}

static struct ivm_error *child(struct ivm_calltree *tree, uint32_t parent,
			       enum ivm_node_type type, uint64_t key,
			       uint32_t *ret)
{
	return child_pc(tree, parent, type, key, 0, ret);
}

struct ivm_error *ivm_calltree_add(struct ivm_calltree *tree,
				   const struct ivm_sample *s)
{
	return ivm_calltree_add_ctx(tree, s, NULL);
}

struct ivm_error *ivm_calltree_add_ctx(struct ivm_calltree *tree,
				       const struct ivm_sample *s,
				       const struct ivm_calltree_context *ctx)
{
	uint32_t path[4 + 2 * IVM_SAMPLE_MAX_FRAMES + 1];
	uint32_t nr = 0, cur = 0, i, id;
	struct ivm_error *err;
	char buf[IVM_COMM_LEN + 4];
	uint64_t set, ns;
	bool timed;
	int k;

	if ((unsigned int)s->kind >= IVM_SAMPLE_NR_KINDS ||
	    s->nr_user > IVM_SAMPLE_MAX_FRAMES ||
	    s->nr_kernel > IVM_SAMPLE_MAX_FRAMES)
		return ivm_error_create(IVM_ERROR_INVALID,
					"sample breaks the record caps");
	path[nr++] = 0;
	if (tree->by != IVM_GROUP_BY_THREAD &&
	    tree->by != IVM_GROUP_BY_PROCESS) {
		err = string_id(tree, group_of(tree, s, ctx, buf, sizeof(buf)),
				&id);
		if (!err)
			err = child(tree, cur, IVM_NODE_GROUP, id, &cur);
		if (err)
			return err;
		path[nr++] = cur;
	}
	if (tree->grouping & IVM_CALLTREE_BY_PROCESS) {
		struct ivm_calltree_node *n;

		err = child(tree, cur, IVM_NODE_PROCESS, s->pid, &cur);
		if (!err && ctx)
			err = string_id(tree, ctx->title, &id);
		if (err)
			return err;
		n = &tree->nodes[cur];
		/*
		 * A process is named by its main thread; a worker's name
		 * would mislabel it (and differ from run to run).
		 */
		if (ctx && ctx->process_comm && *ctx->process_comm)
			snprintf(n->comm, IVM_COMM_LEN, "%s", ctx->process_comm);
		else if (s->tid == s->pid)
			memcpy(n->comm, s->comm, IVM_COMM_LEN);
		if (ctx && id)
			n->title = id;
		path[nr++] = cur;
	}
	if (tree->grouping & IVM_CALLTREE_BY_THREAD) {
		err = child(tree, cur, IVM_NODE_THREAD, s->tid, &cur);
		if (err)
			return err;
		memcpy(tree->nodes[cur].comm, s->comm, IVM_COMM_LEN);
		path[nr++] = cur;
	}
	if (tree->nr_dims) {
		err = label_set_id(tree, s, &set);
		if (!err)
			err = child(tree, cur, IVM_NODE_LABELS, set, &cur);
		if (err)
			return err;
		path[nr++] = cur;
	}
	for (k = s->nr_user - 1; k >= 0; k--) {
		/* Only exactness changes what a pc names. */
		err = child_pc(tree, cur, IVM_NODE_USER, s->user_pcs[k],
			       s->user_flags ? s->user_flags[k] & IVM_PC_EXACT :
			       0, &cur);
		if (err)
			return err;
		path[nr++] = cur;
	}
	for (k = s->nr_kernel - 1; k >= 0; k--) {
		err = child_pc(tree, cur, IVM_NODE_KERNEL, s->kernel_pcs[k],
			       s->kernel_flags ?
			       s->kernel_flags[k] & IVM_PC_EXACT : 0, &cur);
		if (err)
			return err;
		path[nr++] = cur;
	}
	timed = ivm_sample_time_value(s, &ns);
	for (i = 0; i < nr; i++) {
		tree->nodes[path[i]].total[s->kind]++;
		tree->nodes[path[i]].total_ns[s->kind] += ns;
	}
	tree->nodes[cur].self[s->kind]++;
	tree->nodes[cur].self_ns[s->kind] += ns;
	if (timed)
		tree->timed[s->kind]++;
	return NULL;
}

bool ivm_sample_time_value(const struct ivm_sample *s, uint64_t *ns)
{
	uint32_t want = s->kind == IVM_SAMPLE_TO_IDLE ? IVM_COUNTER_IDLE_NS :
			s->kind == IVM_SAMPLE_FROM_IDLE ?
			IVM_COUNTER_HOST_WAKE_NS : 0;
	uint16_t i;

	*ns = 0;
	for (i = 0; want && i < s->nr_counters; i++)
		if (s->counters[i].id == want) {
			*ns = s->counters[i].value;
			return true;
		}
	return false;
}

uint64_t ivm_calltree_timed(const struct ivm_calltree *tree,
			    enum ivm_sample_kind kind)
{
	return tree->timed[kind];
}

uint32_t ivm_calltree_nr_nodes(const struct ivm_calltree *tree)
{
	return tree->nr;
}

const struct ivm_calltree_node *
ivm_calltree_node(const struct ivm_calltree *tree, uint32_t idx)
{
	return &tree->nodes[idx];
}

uint64_t ivm_calltree_total(const struct ivm_calltree *tree,
			    enum ivm_sample_kind kind)
{
	return tree->nodes[0].total[kind];
}

static uint64_t scaled(uint64_t v, double factor)
{
	double x = (double)v * factor + 0.5;

	return x >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)x;
}

void ivm_calltree_scale(struct ivm_calltree *tree, double factor)
{
	uint32_t i;
	int k;

	if (!(factor > 0) || factor == 1)
		return;
	for (i = 0; i < tree->nr; i++) {
		struct ivm_calltree_node *n = &tree->nodes[i];

		for (k = 0; k < IVM_SAMPLE_NR_KINDS; k++) {
			n->self[k] = scaled(n->self[k], factor);
			n->self_ns[k] = scaled(n->self_ns[k], factor);
			n->total[k] = n->self[k];
			n->total_ns[k] = n->self_ns[k];
		}
	}
	/* A child's index is above its parent's: sum upwards. */
	for (i = tree->nr; i-- > 1;) {
		struct ivm_calltree_node *n = &tree->nodes[i];
		struct ivm_calltree_node *up = &tree->nodes[n->parent];

		for (k = 0; k < IVM_SAMPLE_NR_KINDS; k++) {
			up->total[k] += n->total[k];
			up->total_ns[k] += n->total_ns[k];
		}
	}
	for (k = 0; k < IVM_SAMPLE_NR_KINDS; k++)
		tree->timed[k] = scaled(tree->timed[k], factor);
}
