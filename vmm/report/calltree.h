/* SPDX-License-Identifier: MIT */
/*
 * One call tree per guest: samples aggregated by process, thread and stack,
 * with to_idle / from_idle / on_cpu counts.
 *
 * A sample's path from the root is: process (pid), thread (tid), then its
 * user frames outermost first, then its kernel frames outermost first, so a
 * thread blocked in a syscall reads main -> ... -> read -> entry_SYSCALL_64
 * -> ... -> schedule.  Each node counts the samples that end there (self)
 * and that pass through it (total), per sample kind.
 *
 * Nodes live in one array and are named by index; index 0 is the root.
 * Indexes stay valid for the life of the tree (nodes are never removed).
 */
#ifndef IVM_CALLTREE_H
#define IVM_CALLTREE_H

#include <stdint.h>

#include "base/error.h"
#include "profile/sample.h"

enum ivm_node_type {
	IVM_NODE_ROOT,
	IVM_NODE_PROCESS,	/* key: guest tgid */
	IVM_NODE_THREAD,	/* key: guest tid */
	IVM_NODE_USER,		/* key: user pc */
	IVM_NODE_KERNEL,	/* key: kernel pc (runtime address) */
};

/* Grouping of the tree's first levels. */
enum {
	IVM_CALLTREE_BY_PROCESS	= 1 << 0,
	IVM_CALLTREE_BY_THREAD	= 1 << 1,
};

#define IVM_CALLTREE_NONE	UINT32_MAX

struct ivm_calltree_node {
	uint32_t parent;	/* IVM_CALLTREE_NONE for the root */
	uint32_t first_child;	/* IVM_CALLTREE_NONE if a leaf */
	uint32_t next_sibling;
	uint32_t depth;
	enum ivm_node_type type;
	uint64_t key;
	/*
	 * Code frames: IVM_PC_EXACT when key is an interrupted pc, not a
	 * return address (sample.h); part of the node's identity.
	 */
	uint8_t pc_flags;
	char comm[IVM_COMM_LEN];	/* process/thread nodes */
	uint64_t self[IVM_SAMPLE_NR_KINDS];
	uint64_t total[IVM_SAMPLE_NR_KINDS];
};

struct ivm_calltree;

struct ivm_error *ivm_calltree_create(unsigned int grouping,
				      struct ivm_calltree **ret);
void ivm_calltree_destroy(struct ivm_calltree *tree);

/* Add one sample (its frames are read, not kept). */
struct ivm_error *ivm_calltree_add(struct ivm_calltree *tree,
				   const struct ivm_sample *s);

uint32_t ivm_calltree_nr_nodes(const struct ivm_calltree *tree);

/* Node by index; idx must be < ivm_calltree_nr_nodes(). */
const struct ivm_calltree_node *
ivm_calltree_node(const struct ivm_calltree *tree, uint32_t idx);

/* Samples of a kind in the whole tree. */
uint64_t ivm_calltree_total(const struct ivm_calltree *tree,
			    enum ivm_sample_kind kind);

#endif /* IVM_CALLTREE_H */
