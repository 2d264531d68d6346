/* SPDX-License-Identifier: MIT */
/*
 * One call tree per guest: samples aggregated by process, thread and stack,
 * with to_idle / from_idle / on_cpu counts.
 *
 * A sample's path from the root is: its group (what the tree's top level
 * is, enum ivm_group_by: by default its process (pid), then its thread
 * (tid)), then its dimension labels (the --label values it carries, as one
 * node per distinct set), then its user frames outermost first, then its
 * kernel frames outermost first, so a thread blocked in a syscall reads
 * main -> ... -> read -> entry_SYSCALL_64 -> ... -> schedule.  Each node
 * counts the samples that end there (self) and that pass through it
 * (total), per sample kind.
 *
 * Nodes live in one array and are named by index; index 0 is the root.
 * Indexes stay valid for the life of the tree (nodes are never removed).
 */
#ifndef IVM_CALLTREE_H
#define IVM_CALLTREE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "profile/sample.h"

enum ivm_node_type {
	IVM_NODE_ROOT,
	IVM_NODE_PROCESS,	/* key: guest tgid */
	IVM_NODE_THREAD,	/* key: guest tid */
	IVM_NODE_USER,		/* key: user pc */
	IVM_NODE_KERNEL,	/* key: kernel pc (runtime address) */
	IVM_NODE_GROUP,		/* key: string id of its name */
	IVM_NODE_LABELS,	/* key: id of a set of dimension labels */
};

/* Grouping of the tree's first levels (ivm_calltree_create). */
enum {
	IVM_CALLTREE_BY_PROCESS	= 1 << 0,
	IVM_CALLTREE_BY_THREAD	= 1 << 1,
};

struct ivm_calltree;

/*
 * What the tree's top level is (ivm_calltree_group_by); each but THREAD
 * and PROCESS is one IVM_NODE_GROUP node per distinct name.
 */
enum ivm_group_by {
	IVM_GROUP_BY_THREAD,	/* process, then thread: the default */
	IVM_GROUP_BY_PROCESS,	/* process */
	IVM_GROUP_BY_COMM,	/* the process's name: all processes of one
				 * name together (the sample's comm when the
				 * process's is unknown) */
	IVM_GROUP_BY_TITLE,	/* the process's title (command line); its
				 * name in brackets when unknown */
	IVM_GROUP_BY_LABEL,	/* the value of one label ("-": none) */
};

/*
 * "thread", "process", "comm", "title" or "label:KEY" into *by and
 * *label (pointing into s; NULL but for label:).  IVM_ERROR_INVALID
 * naming what is wrong otherwise.
 */
struct ivm_error *ivm_group_by_parse(const char *s, enum ivm_group_by *by,
				     const char **label);

/* What the group's nodes are called: "comm", "title", the label's key. */
const char *ivm_calltree_group_name(const struct ivm_calltree *tree);

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
	uint32_t title;		/* process nodes: string id, 0: unknown */
	uint64_t self[IVM_SAMPLE_NR_KINDS];
	uint64_t total[IVM_SAMPLE_NR_KINDS];
	/*
	 * The same in time, of the samples that carry a time value
	 * (sample.h): a to-idle's idle_ns, a from-idle's host_wake_ns.
	 */
	uint64_t self_ns[IVM_SAMPLE_NR_KINDS];
	uint64_t total_ns[IVM_SAMPLE_NR_KINDS];
};

struct ivm_error *ivm_calltree_create(unsigned int grouping,
				      struct ivm_calltree **ret);
void ivm_calltree_destroy(struct ivm_calltree *tree);

/*
 * Make by the tree's top level (label: the key, for IVM_GROUP_BY_LABEL;
 * copied), instead of the grouping it was created with.  Only before the
 * first sample: IVM_ERROR_INVALID after.
 */
struct ivm_error *ivm_calltree_group_by(struct ivm_calltree *tree,
					enum ivm_group_by by,
					const char *label);

/*
 * The label keys that are dimensions of the profile (the --label values
 * it was taken with; keys copied, at most IVM_SAMPLE_MAX_LABELS): samples
 * get a node of them between their group and their stack.  Other labels
 * (the profiler's own) are not.  Only before the first sample.
 */
struct ivm_error *ivm_calltree_set_dimensions(struct ivm_calltree *tree,
					      const char *const *keys,
					      size_t nr);

/*
 * What a sample belongs to beyond its record: its process's name and
 * title (either NULL or "": unknown).
 */
struct ivm_calltree_context {
	const char *process_comm;
	const char *title;
};

/* Add one sample (its frames are read, not kept); ctx may be NULL. */
struct ivm_error *ivm_calltree_add_ctx(struct ivm_calltree *tree,
				       const struct ivm_sample *s,
				       const struct ivm_calltree_context *ctx);

/* The same without context. */
struct ivm_error *ivm_calltree_add(struct ivm_calltree *tree,
				   const struct ivm_sample *s);

/* The string of id (a GROUP node's key, a process's title); "" for 0. */
const char *ivm_calltree_string(const struct ivm_calltree *tree, uint32_t id);

/*
 * The labels of a LABELS node's key: *nr of them, in the order of the
 * dimensions, value "-" for one the sample lacked.  Owned by the tree.
 */
const struct ivm_label *ivm_calltree_labels(const struct ivm_calltree *tree,
					    uint64_t id, size_t *nr);

uint32_t ivm_calltree_nr_nodes(const struct ivm_calltree *tree);

/* Node by index; idx must be < ivm_calltree_nr_nodes(). */
const struct ivm_calltree_node *
ivm_calltree_node(const struct ivm_calltree *tree, uint32_t idx);

/* Samples of a kind in the whole tree. */
/*
 * Weigh every count and time of the tree by factor (> 0), rounded: a
 * profile that watched the guest only part of its run (--cpu-budget)
 * estimates the whole run's figures so.  Totals are recomputed from the
 * scaled selves, so a node's total is still the sum under it.
 */
void ivm_calltree_scale(struct ivm_calltree *tree, double factor);

uint64_t ivm_calltree_total(const struct ivm_calltree *tree,
			    enum ivm_sample_kind kind);

/* Of them, those that carry a time value (their sum: the root's total_ns). */
uint64_t ivm_calltree_timed(const struct ivm_calltree *tree,
			    enum ivm_sample_kind kind);

/*
 * A sample's time value: IVM_COUNTER_IDLE_NS of a to-idle one,
 * IVM_COUNTER_HOST_WAKE_NS of a from-idle one; false when it has none.
 */
bool ivm_sample_time_value(const struct ivm_sample *s, uint64_t *ns);

#endif /* IVM_CALLTREE_H */
