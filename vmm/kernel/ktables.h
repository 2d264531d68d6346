/* SPDX-License-Identifier: MIT */
/*
 * ktables: the tables read from a guest kernel's vmlinux (BTF, symbols,
 * ORC), once per file for the whole process, shared by every guest that
 * runs that kernel.  A fleet host runs many guests of a few kernels; each
 * kernel's tables are 15-20 MiB, so without sharing idlevm's memory grows
 * with guests rather than with kernels.
 *
 * A file is the same while its device, inode, size and modification time
 * are.  The tables are never changed once loaded (all lookups take them
 * const), so sharing needs no lock; the process's loop is one thread.
 * An entry goes when its last guest puts it.
 */
#ifndef IVM_KTABLES_H
#define IVM_KTABLES_H

#include "base/error.h"
#include "kernel/btf.h"
#include "kernel/ksyms.h"
#include "kernel/orc.h"

struct ivm_ktables;

/* The tables of vmlinux path: loaded, or another guest's with one more
 * user.  Errors of loading its BTF or symbols. */
struct ivm_error *ivm_ktables_get(const char *path, struct ivm_ktables **ret);

/* One user less; the tables are freed with their last. */
void ivm_ktables_put(struct ivm_ktables *kt);

struct ivm_btf *ivm_ktables_btf(const struct ivm_ktables *kt);
struct ivm_ksyms *ivm_ktables_ksyms(const struct ivm_ktables *kt);

/* Its ORC tables, read from the file at the first call.  Owned by kt. */
struct ivm_error *ivm_ktables_orc(struct ivm_ktables *kt,
				  const struct ivm_orc_table **ret);

/* Guests that hold kt now (1: only the caller). */
unsigned int ivm_ktables_users(const struct ivm_ktables *kt);

#endif /* IVM_KTABLES_H */
