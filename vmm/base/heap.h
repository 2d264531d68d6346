/* SPDX-License-Identifier: MIT */
/*
 * The process's heap in use, for what a guest's run holds (the closing
 * lines): malloc's own count, arenas and mmapped blocks, not the RSS, so
 * that pages freed but kept by malloc do not count.  It walks malloc's
 * free lists: call it at a run's milestones, not per event.
 */
#ifndef IVM_HEAP_H
#define IVM_HEAP_H

#include <malloc.h>
#include <stddef.h>

static inline size_t ivm_heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

#endif /* IVM_HEAP_H */
