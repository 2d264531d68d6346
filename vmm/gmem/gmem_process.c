// SPDX-License-Identifier: MIT
/*
 * gmem over the live QEMU process: guest RAM is mapped in QEMU's address
 * space, so a physical read is a process_vm_readv() at the host address the
 * region table gives.  No ptrace stop: the guest keeps running while we read,
 * which is why callers validate what they read (see DESIGN.md, "consistent or
 * discarded").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "gmem/gmem_internal.h"

/* iovecs per process_vm_readv() call; well below IOV_MAX (1024). */
#define BATCH 512

struct process_gmem {
	pid_t pid;
	struct ivm_gmem_region_table table;
	struct batch *spare;	/* batch_get's, or NULL until first asked */
	int spare_taken;	/* atomic: spare in use by a read */
};

/*
 * A batch of remote ranges, each remembering the gpa it stands for.  A
 * piece that starts in the host page where the last range ends, at or
 * after its end, extends that range: the kernel pins a remote range's
 * pages once, where each range costs a pin (and the mmap lock) of its
 * own; the bytes in between land in gap.  A look at the vCPUs reads ~18
 * words of a few pages.  So local iovecs (the pieces and the gaps) are
 * up to two a range.
 */
struct batch {
	struct iovec local[2 * BATCH];
	struct iovec remote[BATCH];
	uint64_t gpa[BATCH];
	size_t nr, nr_local;
	size_t bytes;
	uint8_t gap[4096];
};

static struct ivm_error *batch_flush(struct process_gmem *pg,
				     struct batch *b)
{
	ssize_t done;
	size_t i, acc = 0;

	if (!b->nr)
		return NULL;
	done = process_vm_readv(pg->pid, b->local, b->nr_local, b->remote,
				b->nr, 0);
	if (done < 0) {
		int e = errno;

		if (e == ESRCH)
			return ivm_error_create(IVM_ERROR_GONE,
						"qemu process exited (pid %d)",
						(int)pg->pid);
		if (e == EFAULT)
			return ivm_error_fault(b->gpa[0],
					       "guest physical address 0x%" PRIx64 " not readable in qemu process %d",
					       b->gpa[0], (int)pg->pid);
		return ivm_error_os(e, "process_vm_readv on qemu process %d",
				    (int)pg->pid);
	}
	if ((size_t)done == b->bytes) {
		b->nr = 0;
		b->nr_local = 0;
		b->bytes = 0;
		return NULL;
	}
	/*
	 * A short transfer stops at the first page QEMU does not have mapped
	 * (a stale region table, a balloon, a hot-unplugged DIMM): find the
	 * gpa of the first byte that did not arrive.
	 */
	for (i = 0; i < b->nr; i++) {
		if ((size_t)done < acc + b->remote[i].iov_len)
			break;
		acc += b->remote[i].iov_len;
	}
	if (i == b->nr)
		i = b->nr - 1;	/* cannot happen: done < bytes */
	return ivm_error_fault(b->gpa[i] + ((size_t)done - acc),
			       "guest physical address 0x%" PRIx64 " not readable in qemu process %d (short read)",
			       b->gpa[i] + ((size_t)done - acc), (int)pg->pid);
}

/*
 * Add [hva, hva + n) (guest gpa) to the last range when it starts in the
 * host page where that range ends, at or after its end, and the guest
 * addresses run on as the host's do (the same region).
 */
static bool extend_last(struct batch *b, uint64_t gpa, uint64_t hva,
			uint8_t *out, size_t n)
{
	struct iovec *last;
	uint64_t end, gap;

	if (!b->nr)
		return false;
	last = &b->remote[b->nr - 1];
	end = (uint64_t)(uintptr_t)last->iov_base + last->iov_len;
	gap = hva - end;
	if (hva < end || (end - 1) >> 12 != hva >> 12 ||
	    b->gpa[b->nr - 1] + last->iov_len + gap != gpa)
		return false;
	if (gap) {
		b->local[b->nr_local].iov_base = b->gap;
		b->local[b->nr_local++].iov_len = gap;
	}
	b->local[b->nr_local].iov_base = out;
	b->local[b->nr_local++].iov_len = n;
	last->iov_len += gap + n;
	b->bytes += gap + n;
	return true;
}

/*
 * Queue [gpa, gpa + len) into b, split at region boundaries, flushing when
 * full.  A hole flushes what came before it (so an earlier fault is
 * reported first) and then fails at the hole.
 */
static struct ivm_error *batch_add(struct process_gmem *pg, struct batch *b,
				   uint64_t gpa, uint8_t *out, size_t len)
{
	struct ivm_error *err;

	while (len) {
		const struct ivm_gmem_region *r;
		uint64_t off, n;

		r = ivm_gmem_region_find(&pg->table, gpa);
		if (!r) {
			err = batch_flush(pg, b);
			if (err)
				return err;
			return ivm_error_fault(gpa,
					       "guest physical address 0x%" PRIx64 " not in guest ram",
					       gpa);
		}
		if (b->nr == BATCH || b->nr_local + 2 > 2 * BATCH) {
			err = batch_flush(pg, b);
			if (err)
				return err;
		}
		off = gpa - r->gpa;
		n = r->size - off;
		if (n > len)
			n = len;
		if (!extend_last(b, gpa, r->hva + off, out, n)) {
			b->local[b->nr_local].iov_base = out;
			b->local[b->nr_local++].iov_len = n;
			b->remote[b->nr].iov_base =
				(void *)(uintptr_t)(r->hva + off);
			b->remote[b->nr].iov_len = n;
			b->gpa[b->nr] = gpa;
			b->nr++;
			b->bytes += n;
		}
		out += n;
		len -= n;
		gpa += n;
	}
	return NULL;
}

/*
 * A batch (32 KiB) for one read: the memory's own one, kept between
 * reads, unless a read on another thread has it.  A batch malloc'd and
 * freed at every read was 700 allocations a second on web01, nearly all
 * of idlevm's (heaptrack), each a chance to leave its heap with holes.
 */
static struct batch *batch_get(struct process_gmem *pg)
{
	if (!__atomic_exchange_n(&pg->spare_taken, 1, __ATOMIC_ACQUIRE)) {
		if (!pg->spare)
			pg->spare = malloc(sizeof(*pg->spare));
		if (pg->spare)
			return pg->spare;
		__atomic_store_n(&pg->spare_taken, 0, __ATOMIC_RELEASE);
	}
	return malloc(sizeof(struct batch));
}

static void batch_put(struct process_gmem *pg, struct batch *b)
{
	if (b == pg->spare)
		__atomic_store_n(&pg->spare_taken, 0, __ATOMIC_RELEASE);
	else
		free(b);
}

static struct ivm_error *process_read_phys_many(struct ivm_gmem *gmem,
						const struct ivm_gmem_piece *pieces,
						size_t nr_pieces)
{
	struct process_gmem *pg = gmem->priv;
	struct ivm_error *err;
	struct batch *b;
	size_t i;

	b = batch_get(pg);
	if (!b)
		return &ivm_enomem;
	b->nr = 0;
	b->nr_local = 0;
	b->bytes = 0;
	for (i = 0; i < nr_pieces; i++) {
		err = batch_add(pg, b, pieces[i].gpa, pieces[i].buf,
				pieces[i].len);
		if (err)
			goto out;
	}
	err = batch_flush(pg, b);
out:
	batch_put(pg, b);
	return err;
}

static struct ivm_error *process_read_phys(struct ivm_gmem *gmem, uint64_t gpa,
					   void *buf, size_t len)
{
	struct process_gmem *pg = gmem->priv;
	const struct ivm_gmem_region *r;
	struct iovec local, remote;
	ssize_t done;

	/*
	 * The common case, a read inside one region, without the batch
	 * machinery: one lookup, one system call.
	 */
	r = ivm_gmem_region_find(&pg->table, gpa);
	if (!r || len > r->size - (gpa - r->gpa)) {
		struct ivm_gmem_piece piece = { gpa, buf, len };

		return process_read_phys_many(gmem, &piece, 1);
	}
	local.iov_base = buf;
	local.iov_len = len;
	remote.iov_base = (void *)(uintptr_t)(r->hva + (gpa - r->gpa));
	remote.iov_len = len;
	done = process_vm_readv(pg->pid, &local, 1, &remote, 1, 0);
	if (done == (ssize_t)len)
		return NULL;
	if (done < 0 && errno == ESRCH)
		return ivm_error_create(IVM_ERROR_GONE,
					"qemu process exited (pid %d)",
					(int)pg->pid);
	if (done < 0 && errno != EFAULT)
		return ivm_error_os(errno, "process_vm_readv on qemu process %d",
				    (int)pg->pid);
	if (done < 0)
		done = 0;
	return ivm_error_fault(gpa + done,
			       "guest physical address 0x%" PRIx64 " not readable in qemu process %d",
			       gpa + done, (int)pg->pid);
}

static void process_destroy(struct ivm_gmem *gmem)
{
	struct process_gmem *pg = gmem->priv;

	ivm_gmem_region_table_deinit(&pg->table);
	free(pg->spare);
	free(pg);
}

static const struct ivm_gmem_ops process_ops = {
	.read_phys = process_read_phys,
	.destroy = process_destroy,
	.read_phys_many = process_read_phys_many,
};

struct ivm_error *ivm_gmem_process_create(pid_t pid,
					  const struct ivm_gmem_region *regions,
					  size_t nr_regions,
					  struct ivm_gmem **ret)
{
	struct process_gmem *pg;
	struct ivm_error *err;

	if (pid <= 0)
		return ivm_error_create(IVM_ERROR_INVALID,
					"invalid qemu pid %d", (int)pid);
	pg = calloc(1, sizeof(*pg));
	if (!pg)
		return &ivm_enomem;
	pg->pid = pid;
	err = ivm_gmem_region_table_init(&pg->table, regions, nr_regions);
	if (!err)
		err = ivm_gmem_create(&process_ops, pg, ret);
	if (err) {
		ivm_gmem_region_table_deinit(&pg->table);
		free(pg);
	}
	return err;
}
