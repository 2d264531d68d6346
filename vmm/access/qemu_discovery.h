/* SPDX-License-Identifier: MIT */
/*
 * What idlevm learns about a running QEMU through its monitor: the vCPUs
 * and their host threads, the QEMU process, the guest RAM layout (for the
 * process gmem backend, vmm/gmem/gmem.h) and the vCPU registers.
 *
 * Everything here is parsed from QEMU's answers, which are hostile input:
 * the parsers are bounded (entry counts, field sizes, overflow-checked
 * ranges) and fail with IVM_ERROR_PROTOCOL on nonsense; they are fuzzed
 * (tests/fuzz/fuzz_qemu_registers.c).
 */
#ifndef IVM_QEMU_DISCOVERY_H
#define IVM_QEMU_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "base/error.h"
#include "gmem/gmem.h"
#include "access/qemu_registers.h"
#include "access/qmp.h"

/* One vCPU and the host thread that runs it. */
struct ivm_qemu_vcpu {
	int index;		/* QEMU's cpu-index (HMP "CPU#N", cpu-index) */
	pid_t tid;		/* host thread id of the vCPU thread */
};

struct ivm_qemu_vcpus {
	size_t nr;
	struct ivm_qemu_vcpu vcpu[];	/* in QEMU's order */
};

/*
 * The vCPUs from query-cpus-fast.  Every entry must carry a cpu-index and a
 * thread-id, indexes are unique, and a "target" other than x86_64 is
 * refused (IVM_ERROR_INVALID: idlevm reads x86-64 guests).  The caller frees
 * *ret with free().
 */
struct ivm_error *ivm_qemu_vcpus(struct ivm_qmp *qmp,
				 struct ivm_qemu_vcpus **ret);
/* The same from the "return" value of query-cpus-fast (for tests). */
struct ivm_error *ivm_qemu_parse_vcpus(struct json_object *reply,
				       struct ivm_qemu_vcpus **ret);

/*
 * The pid of the QEMU process.  On a socket it is the SO_PEERCRED peer; under
 * libvirt it is the thread group (Tgid in /proc/TID/status) of the vCPU
 * threads.  Either way every vCPU thread must belong to that process and
 * the process must look like QEMU (its vCPU threads are named "CPU N/..."
 * as QEMU names them, or its executable's name contains "qemu"), so a
 * socket proxy or a recycled thread id is caught rather than read from.
 * proc_root is normally "/proc" (tests may point elsewhere).
 */
struct ivm_error *ivm_qemu_pid(struct ivm_qmp *qmp,
			       const struct ivm_qemu_vcpus *vcpus,
			       const char *proc_root, pid_t *ret);

/* One piece of guest RAM in QEMU's flat view of the "memory" address space. */
struct ivm_qemu_ram_piece {
	uint64_t gpa, size;
	uint64_t offset;	/* offset in the memory region ("@..."), or 0 */
	char name[64];		/* memory region name, truncated */
	bool kvm_slot;		/* marked " KVM": a KVM memory slot */
};

struct ivm_qemu_ram_map {
	size_t nr;
	struct ivm_qemu_ram_piece piece[];	/* ascending, non-overlapping */
};

/* Limit on RAM pieces kept from one `info mtree -f`. */
#define IVM_QEMU_MAX_RAM_PIECES 1024

/*
 * Parse `info mtree -f` output: take the flat view that lists
 * `AS "memory"`, keep its "ram" ranges (not rom, romd, ramd or i/o) and
 * merge neighbours that continue the same region.  Under KVM, QEMU ends
 * each range that is a KVM memory slot with " KVM": that marker is not part
 * of the name, and sets kvm_slot.  The caller frees *ret.
 */
struct ivm_error *ivm_qemu_parse_mtree_ram(const char *text, size_t len,
					   struct ivm_qemu_ram_map **ret);

/*
 * Parse the answer to HMP `gpa2hva GPA`: "Host virtual address for 0x...
 * (NAME) is 0x...".  The echoed address must be gpa; when name is not NULL
 * (and was not truncated) the region name must match.  QEMU's own refusals
 * ("... is not RAM") become IVM_ERROR_NOT_FOUND.
 */
struct ivm_error *ivm_qemu_parse_gpa2hva(const char *text, uint64_t gpa,
					 const char *name, uint64_t *ret);

struct ivm_qemu_ram {
	size_t nr;
	struct ivm_gmem_region region[];	/* ascending gpa */
};

/*
 * Guest RAM regions with their host addresses in the QEMU process, from
 * `info mtree -f` and one `gpa2hva` per region; ready for
 * ivm_gmem_process_create(pid, ram->region, ram->nr, ...).  The caller frees
 * *ret with free().
 */
struct ivm_error *ivm_qemu_ram_regions(struct ivm_qmp *qmp,
				       struct ivm_qemu_ram **ret);

/* All vCPUs' registers in one `info registers -a`.  free() *ret. */
struct ivm_error *ivm_qemu_registers_all(struct ivm_qmp *qmp,
					 struct ivm_qemu_registers **ret);

/*
 * One vCPU's registers: `info registers` with human-monitor-command's
 * cpu-index (which changes no monitor state, unlike HMP `cpu N`).  For
 * several vCPUs one ivm_qemu_registers_all() is cheaper.
 */
struct ivm_error *ivm_qemu_registers(struct ivm_qmp *qmp, int cpu_index,
				     struct ivm_qemu_cpu_regs *ret);

#endif /* IVM_QEMU_DISCOVERY_H */
