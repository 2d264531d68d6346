/* SPDX-License-Identifier: MIT */
/*
 * A guest as the commands see it: opened from a libvirt domain
 * (--domain NAME [--connect URI]), a plain QEMU QMP socket (--qmp PATH) or a
 * memory dump (--core FILE), with the guest kernel found in its memory.
 *
 * ivm_guest_open() assembles the pieces in order: monitor (vmm/access/qmp.h), vCPUs
 * and their host threads, guest RAM (vmm/gmem/gmem.h), the vCPU registers, the
 * kernel's debuginfo (BTF and symbols from vmlinux) and the kernel layout
 * (vmm/kernel/kernel_layout.h).  When no vmlinux is named, the kernel release is
 * read from the guest's own banner in RAM and the debuginfo looked for where
 * distributions and idlevm's image cache put it.  When there is none, the
 * kernel is read from its own memory instead: VMCOREINFO (the core's note,
 * or the page found in RAM, vmm/kernel/vmcoreinfo.h) gives the KASLR offset,
 * phys_base and where the compressed kallsyms tables are; they give the
 * symbols (vmm/kernel/kallsyms_guest.h), and the symbols the in-memory BTF
 * (__start_BTF..__stop_BTF) and ORC tables (ivm_guest_load_orc).  One line
 * on stderr says so.
 */
#ifndef IVM_GUEST_H
#define IVM_GUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "kernel/btf.h"
#include "base/error.h"
#include "gmem/gmem.h"
#include "kernel/kernel_layout.h"
#include "kernel/kmodules.h"
#include "kernel/ksyms.h"
#include "access/libvirt_domain.h"
#include "kernel/orc.h"
#include "access/qemu_discovery.h"
#include "access/qmp.h"
#include "base/x86_64_regs.h"

struct ivm_guest_options {
	const char *domain;		/* libvirt domain name */
	const char *connect_uri;	/* libvirt URI, NULL = default */
	const char *qmp_path;		/* plain QEMU QMP socket */
	const char *core_path;		/* dump-guest-memory ELF core */
	const char *vmlinux;		/* guest kernel debuginfo */
	/*
	 * Open the machine only (monitor, vCPUs, RAM, registers): no kernel
	 * is looked for, so a guest still in its firmware or early boot
	 * opens too.  ivm_guest_open_kernel() can follow.
	 */
	bool machine_only;
};

/* getopt_long entries shared by the commands that open a guest. */
#define IVM_GUEST_LONGOPTS						\
	{ "domain", required_argument, NULL, 'd' },			\
	{ "connect", required_argument, NULL, 'c' },			\
	{ "qmp", required_argument, NULL, 'q' },			\
	{ "core", required_argument, NULL, 'C' },			\
	{ "vmlinux", required_argument, NULL, 'k' }
#define IVM_GUEST_SHORTOPTS "d:c:q:C:k:"
#define IVM_GUEST_USAGE							\
"  -d, --domain NAME    libvirt domain to inspect\n"			\
"  -c, --connect URI    libvirt connection (default qemu:///system)\n"	\
"  -q, --qmp PATH       plain QEMU QMP socket instead of libvirt\n"	\
"  -C, --core FILE      QEMU dump-guest-memory core instead of a live guest\n" \
"  -k, --vmlinux FILE   guest kernel debuginfo (default: found by release)\n"

/* Take option c if it is a guest option; true if it was. */
bool ivm_guest_parse_option(struct ivm_guest_options *opts, int c,
			    const char *arg);

/* Exactly one of domain, qmp, core; IVM_ERROR_INVALID otherwise. */
struct ivm_error *ivm_guest_check_options(const struct ivm_guest_options *opts);

struct ivm_guest_vcpu {
	int index;		/* QEMU cpu-index */
	pid_t tid;		/* host thread (0 for a core) */
	bool halted;		/* HLT state when last read */
	int cpl;		/* -1 unknown */
	struct ivm_x86_regs regs;
	int cpu;		/* guest CPU number, -1 unknown */
};

struct ivm_guest {
	struct ivm_qmp *qmp;		/* NULL for a core */
	pid_t qemu_pid;			/* 0 for a core */
	struct ivm_gmem *gmem;
	const char *gmem_kind;		/* how guest memory is read (static) */
	struct ivm_qemu_ram *ram;	/* QEMU's RAM regions gmem was made of;
					 * NULL for a core */
	size_t nr_vcpus;
	struct ivm_guest_vcpu *vcpus;
	char release[65];		/* kernel release from the banner */
	char *vmlinux;			/* path used; NULL when from_memory */
	/*
	 * No vmlinux: ksyms (link-time addresses, as from a vmlinux) come
	 * from the guest's kallsyms, btf from its memory, and ORC must too.
	 */
	bool from_memory;
	struct ivm_btf *btf;
	struct ivm_ksyms *ksyms;
	/*
	 * With a vmlinux, btf and ksyms are its tables, shared with the
	 * process's other guests of that kernel (kernel/ktables.h), and orc
	 * too once asked for; from memory, all three are this guest's own.
	 */
	struct ivm_ktables *ktables;
	struct ivm_orc_table *orc;	/* from memory, once asked for */
	struct ivm_kernel_layout *layout;
	char *name;			/* for messages: domain, socket or core */
	/*
	 * QEMU runs the guest on KVM (QMP query-kvm at open; false for a
	 * core).  Under TCG the kvm tracepoints never fire and QEMU's memory
	 * holds the vCPUs' current registers (tcg_env.h); under KVM QEMU's
	 * copy is current only right after it synchronised it with the
	 * kernel's (the monitor's `info registers` does).
	 */
	bool kvm;
	bool has_kernel;		/* the kernel fields below are set */
	struct ivm_kmodules *modules;	/* read once, see ivm_guest_modules */
};

struct ivm_error *ivm_guest_open(const struct ivm_guest_options *opts,
				 struct ivm_guest **ret);

/*
 * Where the guest physical range [gpa, gpa + len) is in QEMU's own address
 * space, for a reader inside QEMU's process (the idle gate's BPF program):
 * IVM_ERROR_NOT_FOUND when no one RAM region holds it, IVM_ERROR_INVALID
 * for a core.
 */
struct ivm_error *ivm_guest_qemu_address(const struct ivm_guest *g,
					 uint64_t gpa, uint64_t len,
					 uint64_t *hva);

/*
 * Find the kernel of a guest opened with machine_only (release, debuginfo,
 * layout).  On failure the guest stays open as a machine (has_kernel
 * false), and the error says what was missing: a guest that has not
 * booted far enough reads as "linux_banner not found".
 */
struct ivm_error *ivm_guest_open_kernel(struct ivm_guest *guest,
					const struct ivm_guest_options *opts);
void ivm_guest_close(struct ivm_guest *guest);

/*
 * The guest kernel's ORC table for unwinding: from its vmlinux, or from
 * guest memory (__start_orc_unwind_ip..__stop_orc_unwind_ip,
 * __start_orc_unwind) when the guest was opened without one.  *orc_slide
 * gets what to add to a table ip for a run-time address (the KASLR slide
 * for a vmlinux table, 0 for one read from memory).  The caller owns *ret.
 */
/*
 * The guest kernel's modules (kmodules.h), read from its memory at the
 * first call and kept: the capture engine (their ORC tables) and the
 * profile file (their load addresses) both need them, as of the start.
 * Owned by guest; errors as ivm_kmodules_read, and retried at the next
 * call.
 */
/*
 * The guest's VMCOREINFO (the core's note when usable, else the page in
 * guest RAM), checked against the banner's release (guest->release must
 * be known) and naming the kallsyms tables.  The caller destroys *ret.
 */
struct ivm_vmcoreinfo;
struct ivm_error *ivm_guest_vmcoreinfo(struct ivm_guest *guest,
				       struct ivm_vmcoreinfo **ret);

struct ivm_error *ivm_guest_modules(struct ivm_guest *guest,
				    const struct ivm_kmodules **ret);

/*
 * The kernel's ORC tables (the vmlinux's, or read from guest memory at
 * the first call) and the slide to apply to their addresses.  Owned by
 * the guest, until it is closed.
 */
struct ivm_error *ivm_guest_orc(struct ivm_guest *guest,
				const struct ivm_orc_table **ret,
				uint64_t *orc_slide);

/* Re-read every vCPU's registers and HLT state (live guests only). */
struct ivm_error *ivm_guest_refresh_vcpus(struct ivm_guest *guest);

#endif /* IVM_GUEST_H */
