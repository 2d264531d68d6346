/* SPDX-License-Identifier: MIT */
/*
 * Report writers over a call tree: a text summary of the top stacks per
 * sample kind, folded stacks for FlameGraph / speedscope, pprof
 * (report_pprof.h) and an SVG flame graph (report_svg.h).
 *
 * Frames come from a symbolizer callback, so the writers know nothing about
 * ELF or DWARF; one address may expand to several frames (inline calls),
 * and without a symbolizer, frames print as hex addresses.
 */
#ifndef IVM_REPORT_H
#define IVM_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "report/calltree.h"

/* Inline frames kept per address (matches symbols/ IVM_SYM_MAX_INLINE). */
#define IVM_REPORT_MAX_INLINE	16

/* One frame as the writers print it; strings belong to the symbolizer. */
struct ivm_report_frame {
	const char *function;	/* NULL: unknown, print the address */
	const char *file;	/* NULL: unknown */
	unsigned int line;	/* 0: unknown */
	bool inlined;		/* inlined into the next outer frame */
	/*
	 * The out-of-line frame (not inlined): the pc's offset into its
	 * function, when has_offset.  For `idlevm stack`.
	 */
	bool has_offset;
	uint64_t offset;
	enum ivm_node_type type;	/* IVM_NODE_USER or IVM_NODE_KERNEL */
	bool exact;		/* pc is an interrupted pc, not a return address */
	/*
	 * function is only "FILE+0xADDR": no symbol names the frame (a pprof
	 * location then has no lines, for a later symbolizer).
	 */
	bool raw;
	uint64_t pc;
};

/*
 * User pcs in a report's call tree may carry in bits 48-63 which
 * executable they belong to (cmd_report.c: 1 + the index of its build-id),
 * so that two executables at the same addresses (two PIEs linked at 0) are
 * never merged or named after one another.  Canonical user addresses never
 * set those bits; IVM_REPORT_USER_PC gives the address itself.
 */
#define IVM_REPORT_USER_TAG_SHIFT	48
#define IVM_REPORT_USER_PC(pc)	((uint64_t)(pc) & ((UINT64_C(1) << IVM_REPORT_USER_TAG_SHIFT) - 1))
#define IVM_REPORT_USER_TAG(pc)	((uint64_t)(pc) >> IVM_REPORT_USER_TAG_SHIFT)

struct ivm_symbolizer {
	/*
	 * Fill at most max frames for pc (a user or kernel frame, per type),
	 * innermost first, and return how many; 0 prints the raw address.
	 * exact: pc is an interrupted instruction (name pc itself), not a
	 * return address (name the call, pc - 1).  Strings must stay valid
	 * until the writer returns.
	 */
	unsigned int (*frames)(void *ctx, enum ivm_node_type type, uint64_t pc,
			       bool exact, struct ivm_report_frame *out,
			       unsigned int max);
	void *ctx;
};

enum ivm_report_format {
	IVM_REPORT_TEXT,
	IVM_REPORT_FOLDED,
	IVM_REPORT_PPROF,
	IVM_REPORT_SVG,
	IVM_REPORT_TIMELINE,	/* report/timeline.h: JSON, and HTML beside */
	IVM_REPORT_PERIODS,	/* report/idle_summary.h: one line a period */
	IVM_REPORT_THREADS,	/* report/threads.h: one line a thread */
};

/*
 * What the stacks are weighed by (report --value): samples, or the time
 * value they carry (sample.h), which only one kind has.
 */
enum ivm_report_value {
	IVM_VALUE_COUNT,
	IVM_VALUE_IDLE_TIME,	/* to-idle: how long the idle period lasted */
	IVM_VALUE_WAKE_DELAY,	/* from-idle: the host's delay after the wakeup */
};

/* "count", "idle_time", "wake_delay" into *ret; false for anything else. */
bool ivm_report_value_parse(const char *s, enum ivm_report_value *ret);

/* The kind a time value belongs to; -1 for counts. */
int ivm_report_value_kind(enum ivm_report_value v);

/* What a stack of kind weighs at node (self) or under it (total). */
static inline uint64_t ivm_report_self(const struct ivm_calltree_node *node,
				       int kind, enum ivm_report_value v)
{
	return v == IVM_VALUE_COUNT ? node->self[kind] : node->self_ns[kind];
}

static inline uint64_t ivm_report_total(const struct ivm_calltree_node *node,
					int kind, enum ivm_report_value v)
{
	return v == IVM_VALUE_COUNT ? node->total[kind] : node->total_ns[kind];
}

/* What a profile says of its run, for the writers that record it (pprof). */
struct ivm_report_run {
	uint64_t start_ns;	/* wall clock at the start, ns since the epoch;
				   0: unknown */
	uint64_t duration_ns;	/* 0: unknown */
	uint32_t idle_every;	/* every Nth idle transition sampled; 0: 1 */
	/*
	 * --cpu-budget: the guest was watched watched_ms of elapsed_ms, and
	 * the tree's counts were scaled by scale (1: watched throughout).
	 */
	double scale;
	uint64_t watched_ms, elapsed_ms;
	const char *guest;	/* NULL: unknown */
	const char *kernel;	/* its release; NULL: unknown */
};

struct ivm_mappings;

struct ivm_report_options {
	FILE *out;
	int kind;		/* an ivm_sample_kind, or -1 for all */
	unsigned int top;	/* stacks per kind in the text report */
	struct ivm_symbolizer sym;
	const char *vmlinux;	/* kernel symbols; NULL: as the profile says */
	const char *binary;	/* user symbols of a static guest binary */
	const char *const *binaries;	/* more of them (binary first) */
	size_t nr_binaries;
	const char *system_map;	/* kernel fallback when vmlinux is unusable */
	const char *symdir;	/* .build-id/xx/rest.debug tree, or NULL */
	const char *module_dir;	/* DIR/lib/modules/RELEASE/.../NAME.ko */
	const uint64_t *addresses;	/* --address: resolve these instead */
	size_t nr_addresses;
	enum ivm_report_format format;	/* ivm_report_file: unless folded */
	const char *output;	/* ivm_report_file: write here, not to out */
	const char *title;	/* SVG title; NULL: a default */
	/* pprof: the files frames are in (mappings.h; NULL: none), the run. */
	const struct ivm_mappings *mappings;
	struct ivm_report_run run;
	/* ivm_report_file: the tree's top level (default: by thread) */
	enum ivm_group_by group_by;
	const char *group_label;	/* IVM_GROUP_BY_LABEL's key */
	unsigned int sort;	/* threads: an enum ivm_threads_sort */
	enum ivm_report_value value;	/* text, folded, SVG: the weight */
	/* ivm_report_file, not text: no account of the run on stderr */
	bool quiet;
};

/* Top stacks of each kind with counts and percentages. */
void ivm_report_text(const struct ivm_calltree *tree,
		     const struct ivm_report_options *opts);

/*
 * One line per distinct stack: "frame;frame;... count", outermost first.
 * With kind -1 the kind name is the first frame, so to-idle and from-idle
 * stand apart in one flame graph.  Kernel frames end in "_[k]", inlined
 * ones in "_[i]".
 */
void ivm_report_folded(const struct ivm_calltree *tree,
		       const struct ivm_report_options *opts);

/*
 * The code frames of the stack ending at node leaf, innermost first, with
 * inline frames expanded, into out (at most max); returns the count.  Also
 * gives the stack's process and thread nodes (IVM_CALLTREE_NONE if the
 * tree does not group by them).
 */
size_t ivm_report_stack(const struct ivm_calltree *tree,
			const struct ivm_report_options *opts, uint32_t leaf,
			struct ivm_report_frame *out, size_t max,
			uint32_t *process, uint32_t *thread);

/*
 * The nodes above a stack's frames (its group, process, thread and labels
 * node: calltree.h), IVM_CALLTREE_NONE for those the tree does not have.
 */
struct ivm_report_context {
	uint32_t group, process, thread, labels;
};

void ivm_report_context_of(const struct ivm_calltree *tree, uint32_t leaf,
			   struct ivm_report_context *ret);

/*
 * The name of a group node (its comm, title or label value) or of each
 * label of a labels node ("KEY=VALUE", i < nr), into buf; returns buf.
 */
const char *ivm_report_group_name(const struct ivm_calltree *tree,
				  uint32_t node, char *buf, size_t len);
size_t ivm_report_nr_labels(const struct ivm_calltree *tree, uint32_t node);
const char *ivm_report_label_name(const struct ivm_calltree *tree,
				  uint32_t node, size_t i, char *buf,
				  size_t len);

/* Most frames ivm_report_stack() can return for one stack. */
#define IVM_REPORT_MAX_STACK	(2 * IVM_SAMPLE_MAX_FRAMES * IVM_REPORT_MAX_INLINE)

/*
 * A frame's display name into buf: "function", or "0x..." when unknown,
 * with "_[k]" for kernel frames when decorate.  Returns buf.
 */
const char *ivm_report_frame_name(const struct ivm_report_frame *f,
				  bool decorate, char *buf, size_t len);

/* "comm [pid]" or "comm/tid" of a process or thread node into buf. */
const char *ivm_report_task_name(const struct ivm_calltree_node *n, char *buf,
				 size_t len);

#endif /* IVM_REPORT_H */
