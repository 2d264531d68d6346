/* SPDX-License-Identifier: MIT */
/*
 * Report writers over a call tree: a text summary of the top stacks per
 * sample kind, and folded stacks for FlameGraph / speedscope.
 *
 * Names come from a symbolizer callback, so the writers know nothing about
 * ELF or DWARF; without one, frames print as hex addresses.
 */
#ifndef IVM_REPORT_H
#define IVM_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "calltree.h"

struct ivm_symbolizer {
	/*
	 * Write the name of pc (a user or kernel frame, per type) into buf
	 * and return buf, or return NULL to print the raw address.
	 */
	const char *(*name)(void *ctx, enum ivm_node_type type, uint64_t pc,
			    char *buf, size_t len);
	void *ctx;
};

struct ivm_report_options {
	FILE *out;
	int kind;		/* an ivm_sample_kind, or -1 for all */
	unsigned int top;	/* stacks per kind in the text report */
	struct ivm_symbolizer sym;
	const char *vmlinux;	/* kernel symbols; NULL: as the profile says */
	const char *binary;	/* user symbols of a static guest binary */
};

/* Top stacks of each kind with counts and percentages. */
void ivm_report_text(const struct ivm_calltree *tree,
		     const struct ivm_report_options *opts);

/*
 * One line per distinct stack: "frame;frame;... count", outermost first.
 * With kind -1 the kind name is the first frame, so to-idle and from-idle
 * stand apart in one flame graph.
 */
void ivm_report_folded(const struct ivm_calltree *tree,
		       const struct ivm_report_options *opts);

#endif /* IVM_REPORT_H */
