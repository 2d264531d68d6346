// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "report/calltree.h"

/*
 * Children are found through one open-addressing hash table keyed by
 * (parent, type, key) rather than by walking sibling lists: a kernel entry
 * point such as entry_SYSCALL_64 can have hundreds of children.
 */
struct ivm_calltree {
	unsigned int grouping;
	struct ivm_calltree_node *nodes;
	uint32_t nr, cap;
	uint32_t *slots;	/* node index + 1; 0 = empty */
	uint32_t nr_slots;	/* power of two */
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
	if (!tree)
		return;
	free(tree->nodes);
	free(tree->slots);
	free(tree);
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
	uint32_t path[2 + 2 * IVM_SAMPLE_MAX_FRAMES + 1];
	uint32_t nr = 0, cur = 0, i;
	struct ivm_error *err;
	int k;

	if ((unsigned int)s->kind >= IVM_SAMPLE_NR_KINDS ||
	    s->nr_user > IVM_SAMPLE_MAX_FRAMES ||
	    s->nr_kernel > IVM_SAMPLE_MAX_FRAMES)
		return ivm_error_create(IVM_ERROR_INVALID,
					"sample breaks the record caps");
	path[nr++] = 0;
	if (tree->grouping & IVM_CALLTREE_BY_PROCESS) {
		err = child(tree, cur, IVM_NODE_PROCESS, s->pid, &cur);
		if (err)
			return err;
		/*
		 * A process is named by its main thread; a worker's name
		 * would mislabel it (and differ from run to run).
		 */
		if (s->tid == s->pid)
			memcpy(tree->nodes[cur].comm, s->comm, IVM_COMM_LEN);
		path[nr++] = cur;
	}
	if (tree->grouping & IVM_CALLTREE_BY_THREAD) {
		err = child(tree, cur, IVM_NODE_THREAD, s->tid, &cur);
		if (err)
			return err;
		memcpy(tree->nodes[cur].comm, s->comm, IVM_COMM_LEN);
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
	for (i = 0; i < nr; i++)
		tree->nodes[path[i]].total[s->kind]++;
	tree->nodes[cur].self[s->kind]++;
	return NULL;
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
