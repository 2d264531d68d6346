/* SPDX-License-Identifier: MIT */
/*
 * ksym_hits: the guest kernel symbols a profile's samples landed in, so a
 * profile taken without any vmlinux (symbols from the guest's own kallsyms)
 * carries the names it needs: a report made elsewhere, with no debuginfo
 * and no access to the guest, still names kernel frames.
 *
 * Each symbol is reported once, in the order first hit; the caller writes
 * the new ones out at every flush so a run cut short keeps them too.
 */
#ifndef IVM_KSYM_HITS_H
#define IVM_KSYM_HITS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "kernel/ksyms.h"

struct ivm_ksym_hits;

/* Over ksyms (borrowed), whose addresses are runtime minus slide. */
struct ivm_error *ivm_ksym_hits_create(const struct ivm_ksyms *ksyms,
				       uint64_t slide,
				       struct ivm_ksym_hits **ret);
void ivm_ksym_hits_destroy(struct ivm_ksym_hits *h);

/* Note the symbols of n runtime kernel pcs (return addresses). */
struct ivm_error *ivm_ksym_hits_add(struct ivm_ksym_hits *h,
				    const uint64_t *pcs, size_t n);

/*
 * Symbols hit since the last call, as a borrowed array valid until the
 * next add or take; *nr gets their number.
 */
const struct ivm_ksym *const *ivm_ksym_hits_take_new(struct ivm_ksym_hits *h,
						     size_t *nr);

/*
 * The metadata value that carries k ("ksym: ADDR SIZE TYPE NAME", hex
 * link-time addresses, like a System.map line with its size): one line of
 * printable bytes whatever the guest's name held.  The one writer of these
 * lines; report/frame_names.c is their one reader.
 */
#define IVM_KSYM_META_MAX 256
void ivm_ksym_meta_value(const struct ivm_ksym *k,
			 char buf[IVM_KSYM_META_MAX]);

/*
 * Forget every symbol hit so far: each is reported again when next hit
 * (a new file of a continuous run carries the names it needs itself).
 */
void ivm_ksym_hits_forget(struct ivm_ksym_hits *h);

#endif /* IVM_KSYM_HITS_H */
