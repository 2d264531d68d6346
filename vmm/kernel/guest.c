// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <pwd.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <json-c/json.h>

#include "kernel/guest.h"
#include "kernel/kallsyms_guest.h"
#include "kernel/ktables.h"
#include "gmem/vmem.h"
#include "kernel/vmcoreinfo.h"

bool ivm_guest_parse_option(struct ivm_guest_options *opts, int c,
			    const char *arg)
{
	switch (c) {
	case 'd':
		opts->domain = arg;
		return true;
	case 'c':
		opts->connect_uri = arg;
		return true;
	case 'q':
		opts->qmp_path = arg;
		return true;
	case 'C':
		opts->core_path = arg;
		return true;
	case 'k':
		opts->vmlinux = arg;
		return true;
	default:
		return false;
	}
}

struct ivm_error *ivm_guest_check_options(const struct ivm_guest_options *opts)
{
	int sources = !!opts->domain + !!opts->qmp_path + !!opts->core_path;

	if (sources == 0)
		return ivm_error_create(IVM_ERROR_INVALID,
					"no guest given: use --domain NAME, --qmp PATH or --core FILE");
	if (sources > 1)
		return ivm_error_create(IVM_ERROR_INVALID,
					"give only one of --domain, --qmp and --core");
	if (opts->connect_uri && !opts->domain)
		return ivm_error_create(IVM_ERROR_INVALID,
					"--connect goes with --domain");
	return NULL;
}

static bool release_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
	       c == '+' || c == '~';
}

/* Scan window: the banner lives in the kernel image, in the low GiBs. */
#define SCAN_LIMIT	(8ull << 30)
#define SCAN_CHUNK	(2ull << 20)

/*
 * Find "Linux version RELEASE " in guest physical memory (the kernel's
 * banner; the first plausible release wins) and copy RELEASE (at most 64
 * bytes of [A-Za-z0-9._+~-]) to release.
 */
static struct ivm_error *find_release(struct ivm_gmem *gmem, char release[65])
{
	static const char prefix[] = "Linux version ";
	const size_t plen = sizeof(prefix) - 1;
	/* Chunk plus an overlap so a banner across two chunks is found. */
	size_t buflen = SCAN_CHUNK + plen + 65;
	uint64_t gpa;
	char *buf;

	buf = malloc(buflen);
	if (!buf)
		return &ivm_enomem;
	for (gpa = 0; gpa < SCAN_LIMIT; gpa += SCAN_CHUNK) {
		struct ivm_error *err;
		char *p, *end;
		size_t len = buflen;

		err = ivm_gmem_read_phys(gmem, gpa, buf, len);
		if (err) {
			/* A hole, or the end of RAM: try the chunk alone. */
			ivm_error_destroy(err);
			len = SCAN_CHUNK;
			err = ivm_gmem_read_phys(gmem, gpa, buf, len);
			if (err) {
				ivm_error_destroy(err);
				continue;
			}
		}
		for (p = buf, end = buf + len;
		     (p = memmem(p, (size_t)(end - p), prefix, plen));
		     p++) {
			char *r = p + plen;
			size_t n = 0;

			while (r + n < end && n < 64 && release_char(r[n]))
				n++;
			/* A real banner: "RELEASE (builder@host) ..." */
			if (n >= 3 && r + n + 1 < end && r[n] == ' ' &&
			    r[n + 1] == '(' && r[0] >= '0' && r[0] <= '9') {
				memcpy(release, r, n);
				release[n] = '\0';
				free(buf);
				return NULL;
			}
		}
	}
	free(buf);
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"no Linux kernel banner in guest memory (has the guest booted?)");
}

/*
 * Where distributions and idlevm's image cache keep a release's vmlinux;
 * IDLEVM_DEBUG_DIRS (directories separated by ':') replaces these, each
 * directory searched for vmlinux-RELEASE and RELEASE/vmlinux.
 */
/* DIR (n bytes) + before + release + after, if that file is readable. */
static char *readable(const char *dir, int n, const char *before,
		      const char *release, const char *after)
{
	char *path;

	if (asprintf(&path, "%.*s%s%s%s", n, dir, before, release, after) < 0)
		return NULL;
	if (access(path, R_OK) == 0)
		return path;
	free(path);
	return NULL;
}

static char *find_vmlinux(const char *release)
{
	static const struct {
		const char *before, *after;
	} places[] = {
		{ "/usr/lib/debug/boot/vmlinux-", "" },
		{ "/usr/lib/debug/lib/modules/", "/vmlinux" },
		{ "/var/cache/idlevm/", "/vmlinux" },
		{ "/boot/vmlinux-", "" },
		{ "/lib/modules/", "/build/vmlinux" },
	};
	const char *p = getenv("IDLEVM_DEBUG_DIRS");
	char *path = NULL;
	size_t i;

	if (p) {
		while (*p && !path) {
			int n = (int)strcspn(p, ":");

			if (n)
				path = readable(p, n, "/vmlinux-", release, "");
			if (n && !path)
				path = readable(p, n, "/", release, "/vmlinux");
			p += n + (p[n] == ':');
		}
		return path;
	}
	for (i = 0; i < sizeof(places) / sizeof(places[0]) && !path; i++)
		path = readable("", 0, places[i].before, release,
				places[i].after);
	return path;
}

/* QMP query-kvm: whether QEMU runs the guest on KVM. */
static struct ivm_error *query_kvm(struct ivm_guest *g)
{
	struct json_object *reply, *enabled;
	struct ivm_error *err;

	err = ivm_qmp_execute(g->qmp, "query-kvm", NULL, &reply);
	if (err)
		return ivm_error_wrap(err, "asking qemu for its accelerator");
	g->kvm = json_object_object_get_ex(reply, "enabled", &enabled) &&
		 json_object_get_boolean(enabled);
	json_object_put(reply);
	return NULL;
}

/*
 * One byte of guest RAM, read as every later read will be: a QEMU of
 * another user (libvirt's runs as libvirt-qemu) is readable only with
 * CAP_SYS_PTRACE, and without it each read fails alike; better said once,
 * here, than as a kernel that cannot be found in memory that reads as
 * holes.
 */
static struct ivm_error *probe_process_read(struct ivm_guest *g,
					    const struct ivm_gmem_region *r)
{
	struct ivm_error *err;
	char path[64], user[64];
	struct passwd *pw;
	struct stat st;
	uint8_t byte;

	err = ivm_gmem_read_phys(g->gmem, r->gpa, &byte, 1);
	if (!err || err->code != IVM_ERROR_OS ||
	    (err->errnum != EPERM && err->errnum != EACCES))
		return err;
	snprintf(path, sizeof(path), "/proc/%d", (int)g->qemu_pid);
	if (stat(path, &st) < 0)
		snprintf(user, sizeof(user), "?");
	else if ((pw = getpwuid(st.st_uid)))
		snprintf(user, sizeof(user), "%s", pw->pw_name);
	else
		snprintf(user, sizeof(user), "uid %u", (unsigned int)st.st_uid);
	return ivm_error_wrap(err,
			      "cannot read the guest's memory in qemu process %d (user %s): idlevm needs CAP_SYS_PTRACE to read another user's process (run it as root, or give it that capability)",
			      (int)g->qemu_pid, user);
}

static struct ivm_error *open_live(struct ivm_guest *g,
				   const struct ivm_guest_options *opts)
{
	struct ivm_qemu_vcpus *vcpus = NULL;
	struct ivm_qemu_ram *ram = NULL;
	struct ivm_libvirt_domain *ldom;
	struct ivm_error *err;
	size_t i;

	if (opts->domain) {
		/* Lifecycle events need libvirt's loop before the connection. */
		err = ivm_qmp_libvirt_event_loop_start();
		if (err)
			return err;
		err = ivm_libvirt_domain_open(opts->connect_uri, opts->domain,
					      &ldom);
		if (err)
			return err;
		err = ivm_qmp_connect_libvirt(ldom, &g->qmp);
		/*
		 * The client holds its own references, and replaces them when
		 * libvirtd restarts: kept here, this connection would outlive
		 * its libvirtd (an eventfd and a socket per restart).
		 */
		ivm_libvirt_domain_close(ldom);
	} else {
		err = ivm_qmp_connect_socket(opts->qmp_path, &g->qmp);
	}
	if (err)
		return err;
	err = ivm_qemu_vcpus(g->qmp, &vcpus);
	if (err)
		return ivm_error_wrap(err, "listing vCPUs");
	err = ivm_qemu_pid(g->qmp, vcpus, "/proc", &g->qemu_pid);
	if (err)
		goto out;
	g->vcpus = calloc(vcpus->nr, sizeof(*g->vcpus));
	if (!g->vcpus) {
		err = &ivm_enomem;
		goto out;
	}
	g->nr_vcpus = vcpus->nr;
	for (i = 0; i < vcpus->nr; i++) {
		g->vcpus[i].index = vcpus->vcpu[i].index;
		g->vcpus[i].tid = vcpus->vcpu[i].tid;
		g->vcpus[i].cpu = -1;
		g->vcpus[i].cpl = -1;
	}
	/* The accelerator decides where registers come from (tcg_env.h). */
	err = query_kvm(g);
	if (err)
		goto out;
	err = ivm_qemu_ram_regions(g->qmp, &ram);
	if (err) {
		err = ivm_error_wrap(err, "finding guest RAM");
		goto out;
	}
	/*
	 * Shared RAM can be mapped and read without system calls; private
	 * RAM (QEMU's default) is read with process_vm_readv.
	 */
	err = ivm_gmem_mmap_create(g->qemu_pid, ram->region, ram->nr, &g->gmem);
	if (!err) {
		g->gmem_kind = "mmap of shared guest RAM";
	} else {
		ivm_error_destroy(err);
		err = ivm_gmem_process_create(g->qemu_pid, ram->region,
					      ram->nr, &g->gmem);
		if (err)
			goto out;
		g->gmem_kind = "process_vm_readv";
		err = probe_process_read(g, &ram->region[0]);
		if (err)
			goto out;
	}
	g->ram = ram;
	ram = NULL;
	err = ivm_guest_refresh_vcpus(g);
out:
	free(vcpus);
	free(ram);
	return err;
}

struct ivm_error *ivm_guest_qemu_address(const struct ivm_guest *g,
					 uint64_t gpa, uint64_t len,
					 uint64_t *hva)
{
	size_t i;

	if (!g->ram)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: no QEMU process", g->name);
	for (i = 0; i < g->ram->nr; i++) {
		const struct ivm_gmem_region *r = &g->ram->region[i];

		if (gpa >= r->gpa && gpa - r->gpa <= r->size &&
		    len <= r->size - (gpa - r->gpa)) {
			*hva = r->hva + (gpa - r->gpa);
			return NULL;
		}
	}
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"guest physical 0x%" PRIx64 " is in no RAM region",
				gpa);
}

static struct ivm_error *open_core(struct ivm_guest *g,
				   const struct ivm_guest_options *opts)
{
	struct ivm_error *err;
	size_t i;

	err = ivm_gmem_core_create(opts->core_path, &g->gmem);
	if (err)
		return err;
	g->gmem_kind = "memory dump";
	g->nr_vcpus = ivm_gmem_core_nr_cpus(g->gmem);
	if (!g->nr_vcpus)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: the core holds no vCPU state",
					opts->core_path);
	g->vcpus = calloc(g->nr_vcpus, sizeof(*g->vcpus));
	if (!g->vcpus)
		return &ivm_enomem;
	for (i = 0; i < g->nr_vcpus; i++) {
		struct ivm_guest_vcpu *v = &g->vcpus[i];

		v->index = (int)i;
		v->cpu = -1;
		v->cpl = -1;
		err = ivm_gmem_core_cpu_state(g->gmem, i, &v->regs);
		if (err)
			return ivm_error_wrap(err, "vCPU %zu state", i);
		if (v->regs.valid & IVM_X86_REGS_SEGMENTS)
			v->cpl = v->regs.cs & 3;
	}
	return NULL;
}

struct ivm_error *ivm_guest_refresh_vcpus(struct ivm_guest *g)
{
	struct ivm_qemu_registers *regs;
	struct ivm_error *err;
	size_t i, j;

	if (!g->qmp)
		return NULL;
	err = ivm_qemu_registers_all(g->qmp, &regs);
	if (err)
		return ivm_error_wrap(err, "reading vCPU registers");
	for (i = 0; i < g->nr_vcpus; i++) {
		for (j = 0; j < regs->nr; j++) {
			if (regs->cpu[j].cpu_index != g->vcpus[i].index)
				continue;
			g->vcpus[i].halted = regs->cpu[j].halted;
			g->vcpus[i].cpl = regs->cpu[j].cpl;
			g->vcpus[i].regs = regs->cpu[j].regs;
			break;
		}
		if (j == regs->nr) {
			free(regs);
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"qemu printed no registers for vCPU %d",
						g->vcpus[i].index);
		}
	}
	free(regs);
	return NULL;
}

static bool all_mapped(const struct ivm_guest *g)
{
	size_t i;

	for (i = 0; i < g->nr_vcpus; i++)
		if (g->vcpus[i].cpu < 0)
			return false;
	return true;
}

/*
 * Which guest CPU a vCPU is comes from its GS base in kernel mode; QEMU's
 * `info registers` does not show the kernel GS base, so a vCPU caught in
 * user mode is unknown.  It does not change CPU, so look again a few times
 * until it is seen in the kernel; failing that, take its APIC id, which is
 * QEMU's cpu-index for the default topology (one thread per core).
 */
static void map_user_mode_vcpus(struct ivm_guest *g)
{
	struct ivm_error *err;
	unsigned int cpu;
	int tries;
	size_t i;

	for (tries = 0; tries < 50 && g->qmp && !all_mapped(g); tries++) {
		err = ivm_guest_refresh_vcpus(g);
		if (err) {
			ivm_error_destroy(err);
			break;
		}
		for (i = 0; i < g->nr_vcpus; i++) {
			if (g->vcpus[i].cpu >= 0)
				continue;
			err = ivm_kernel_cpu_from_regs(g->layout,
						       &g->vcpus[i].regs, &cpu);
			if (!err)
				g->vcpus[i].cpu = (int)cpu;
			ivm_error_destroy(err);
		}
	}
	for (i = 0; i < g->nr_vcpus; i++) {
		if (g->vcpus[i].cpu >= 0 || g->vcpus[i].index < 0)
			continue;
		err = ivm_kernel_cpu_from_apic_id(g->layout,
						  (uint32_t)g->vcpus[i].index,
						  &cpu);
		if (!err)
			g->vcpus[i].cpu = (int)cpu;
		ivm_error_destroy(err);
	}
}

/*
 * The guest's VMCOREINFO: a core's note when it has a usable one, else the
 * page in guest RAM.  Either way it must be of the banner's release and
 * name the kallsyms tables.
 */
struct ivm_error *ivm_guest_vmcoreinfo(struct ivm_guest *g,
				       struct ivm_vmcoreinfo **ret)
{
	const char *note = ivm_gmem_is_core(g->gmem) ?
			   ivm_gmem_core_vmcoreinfo(g->gmem) : NULL;
	struct ivm_error *note_err = NULL, *err;

	if (note) {
		note_err = ivm_vmcoreinfo_parse(note, IVM_VMCOREINFO_MAX_TEXT,
						ret);
		if (!note_err) {
			note_err = ivm_vmcoreinfo_check(
				*ret, g->release,
				ivm_kallsyms_vmcoreinfo_symbols);
			if (!note_err)
				return NULL;
			ivm_vmcoreinfo_destroy(*ret);
			*ret = NULL;
		}
	}
	/* No note, or a bad one: the kernel's own page may still be fine. */
	err = ivm_vmcoreinfo_find(g->gmem, g->release,
				  ivm_kallsyms_vmcoreinfo_symbols, ret);
	if (err && note_err)
		err = ivm_error_wrap(err, "the core's VMCOREINFO note is unusable (%s)",
				     ivm_error_string(note_err));
	ivm_error_destroy(note_err);
	return err;
}

/* Run-time [start, stop) of a pair of kernel image symbols. */
static struct ivm_error *symbol_range(const struct ivm_ksyms *ksyms,
				      uint64_t slide, const char *start,
				      const char *stop, uint64_t max,
				      uint64_t *lo, uint64_t *hi)
{
	struct ivm_error *err;

	err = ivm_ksyms_lookup(ksyms, start, lo);
	if (!err)
		err = ivm_ksyms_lookup(ksyms, stop, hi);
	if (err)
		return err;
	if (*hi <= *lo || *hi - *lo > max || *lo < IVM_KERNEL_START_MAP)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s..%s is not a range of at most %" PRIu64 " bytes",
					start, stop, max);
	*lo += slide;
	*hi += slide;
	return NULL;
}

/*
 * No vmlinux: symbols from the guest's kallsyms and BTF from its memory,
 * both found through VMCOREINFO; *slide gets its KERNELOFFSET.
 */
static struct ivm_error *kernel_from_memory(struct ivm_guest *g,
					    uint64_t *slide)
{
	struct ivm_kallsyms_addrs addrs;
	struct ivm_kmem_image image = { .gmem = g->gmem };
	struct ivm_kmem_reader mem;
	struct ivm_vmcoreinfo *vi;
	struct ivm_error *err;
	uint64_t lo, hi;
	int64_t phys_base;
	void *blob;

	err = ivm_guest_vmcoreinfo(g, &vi);
	if (err)
		return err;
	err = ivm_vmcoreinfo_kerneloffset(vi, slide);
	if (!err)
		err = ivm_vmcoreinfo_number(vi, "phys_base", &phys_base);
	if (!err)
		err = ivm_kallsyms_addrs_from_vmcoreinfo(vi, &addrs);
	ivm_vmcoreinfo_destroy(vi);
	if (err)
		return err;
	image.phys_base = (uint64_t)phys_base;
	ivm_kmem_reader_image(&image, &mem);
	err = ivm_kallsyms_read_guest(&mem, &addrs, *slide, &g->ksyms);
	if (err)
		return ivm_error_wrap(err, "reading the guest's kallsyms");
	err = symbol_range(g->ksyms, *slide, "__start_BTF", "__stop_BTF",
			   IVM_BTF_MAX_SIZE, &lo, &hi);
	if (err)
		return ivm_error_wrap(err, "the guest's BTF");
	blob = malloc(hi - lo);
	if (!blob)
		return &ivm_enomem;
	err = mem.read(mem.ctx, lo, blob, hi - lo);
	if (!err)
		err = ivm_btf_load_blob(blob, hi - lo, &g->btf);
	free(blob);
	if (err)
		return ivm_error_wrap(err, "the guest's BTF");
	return NULL;
}

struct ivm_error *ivm_guest_orc(struct ivm_guest *g,
				const struct ivm_orc_table **ret,
				uint64_t *orc_slide)
{
	struct ivm_kmem_gmem kmem = { .gmem = g->gmem };
	struct ivm_kmem_reader mem;
	struct ivm_error *err;
	uint64_t slide = ivm_kernel_layout_slide(g->layout);
	uint64_t ip_lo, ip_hi, orc_lo, orc_hi;

	if (!g->from_memory) {
		*orc_slide = slide;
		return ivm_ktables_orc(g->ktables, ret);
	}
	*orc_slide = 0;
	if (g->orc) {
		*ret = g->orc;
		return NULL;
	}
	err = symbol_range(g->ksyms, slide, "__start_orc_unwind_ip",
			   "__stop_orc_unwind_ip",
			   (uint64_t)IVM_ORC_MAX_ENTRIES * 4, &ip_lo, &ip_hi);
	if (!err)
		err = symbol_range(g->ksyms, slide, "__start_orc_unwind",
				   "__stop_orc_unwind",
				   (uint64_t)IVM_ORC_MAX_ENTRIES * 6, &orc_lo,
				   &orc_hi);
	if (err)
		return ivm_error_wrap(err, "the guest's ORC tables");
	/* Both arrays have one entry per ip. */
	if ((ip_hi - ip_lo) % 4 || (orc_hi - orc_lo) / 6 < (ip_hi - ip_lo) / 4)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"the guest's ORC tables disagree: %" PRIu64 " ip bytes, %" PRIu64 " entry bytes",
					ip_hi - ip_lo, orc_hi - orc_lo);
	kmem.cr3 = ivm_kernel_layout_cr3(g->layout);
	kmem.la57 = ivm_kernel_layout_la57(g->layout);
	ivm_kmem_reader_gmem(&kmem, &mem);
	err = ivm_orc_load_guest(&mem, ip_lo, ip_hi, orc_lo,
				 ivm_orc_format_for_release(g->release), &g->orc);
	if (!err)
		*ret = g->orc;
	return err;
}

static struct ivm_error *open_kernel(struct ivm_guest *g,
				     const struct ivm_guest_options *opts)
{
	struct ivm_kernel_layout_config cfg = { 0 };
	struct ivm_x86_regs *regs;
	struct ivm_error *err;
	size_t i;

	if (opts->vmlinux) {
		g->vmlinux = strdup(opts->vmlinux);
		if (!g->vmlinux)
			return &ivm_enomem;
	} else {
		g->vmlinux = find_vmlinux(g->release);
	}
	if (g->vmlinux) {
		err = ivm_ktables_get(g->vmlinux, &g->ktables);
		if (err)
			return err;
		g->btf = ivm_ktables_btf(g->ktables);
		g->ksyms = ivm_ktables_ksyms(g->ktables);
	} else {
		uint64_t slide;

		g->from_memory = true;
		err = kernel_from_memory(g, &slide);
		if (err)
			return ivm_error_wrap(err,
					      "no debuginfo for guest kernel %s (pass --vmlinux FILE; on Debian: the linux-image-%s-dbg package%s), and its memory does not give its symbols",
					      g->release, g->release,
					      getenv("IDLEVM_DEBUG_DIRS") ?
					      ", or add its directory to IDLEVM_DEBUG_DIRS" : "");
		cfg.has_slide_hint = true;
		cfg.slide_hint = slide;
		fprintf(stderr,
			"idlevm: no vmlinux for %s; using the guest's kallsyms, BTF and ORC from its memory\n",
			g->release);
	}

	regs = calloc(g->nr_vcpus, sizeof(*regs));
	if (!regs)
		return &ivm_enomem;
	for (i = 0; i < g->nr_vcpus; i++)
		regs[i] = g->vcpus[i].regs;
	cfg.btf = g->btf;
	cfg.ksyms = g->ksyms;
	cfg.vcpu_regs = regs;
	cfg.nr_vcpus = g->nr_vcpus;
	if (!g->from_memory && ivm_gmem_is_core(g->gmem) &&
	    ivm_gmem_core_vmcoreinfo(g->gmem)) {
		struct ivm_vmcoreinfo *vi = NULL;
		struct ivm_error *e = ivm_vmcoreinfo_parse(
			ivm_gmem_core_vmcoreinfo(g->gmem),
			IVM_VMCOREINFO_MAX_TEXT + 1, &vi);

		if (!e)
			e = ivm_vmcoreinfo_kerneloffset(vi, &cfg.slide_hint);
		cfg.has_slide_hint = !e;
		ivm_error_destroy(e);
		ivm_vmcoreinfo_destroy(vi);
	}
	err = ivm_kernel_layout_create(g->gmem, &cfg, &g->layout);
	free(regs);
	if (err)
		return ivm_error_wrap(err, "finding the kernel of %s with %s",
				      g->name, g->vmlinux ? g->vmlinux :
				      "its kallsyms and BTF");
	for (i = 0; i < g->nr_vcpus; i++)
		g->vcpus[i].cpu = ivm_kernel_layout_vcpu_cpu(g->layout, i);
	map_user_mode_vcpus(g);
	return NULL;
}

struct ivm_error *ivm_guest_open(const struct ivm_guest_options *opts,
				 struct ivm_guest **ret)
{
	struct ivm_guest *g;
	struct ivm_error *err;

	err = ivm_guest_check_options(opts);
	if (err)
		return err;
	g = calloc(1, sizeof(*g));
	if (!g)
		return &ivm_enomem;
	g->name = strdup(opts->domain ? opts->domain :
			 opts->qmp_path ? opts->qmp_path : opts->core_path);
	if (!g->name) {
		free(g);
		return &ivm_enomem;
	}
	err = opts->core_path ? open_core(g, opts) : open_live(g, opts);
	if (!err && !opts->machine_only)
		err = ivm_guest_open_kernel(g, opts);
	if (err) {
		ivm_guest_close(g);
		return err;
	}
	*ret = g;
	return NULL;
}

/* The kernel's tables: a share of the vmlinux's, or the guest's own. */
static void drop_tables(struct ivm_guest *g)
{
	if (g->ktables) {
		ivm_ktables_put(g->ktables);
	} else {
		ivm_ksyms_destroy(g->ksyms);
		ivm_btf_destroy(g->btf);
	}
	ivm_orc_destroy(g->orc);
	g->ktables = NULL;
	g->ksyms = NULL;
	g->btf = NULL;
	g->orc = NULL;
}

struct ivm_error *ivm_guest_open_kernel(struct ivm_guest *g,
					const struct ivm_guest_options *opts)
{
	struct ivm_error *err;

	if (g->has_kernel)
		return NULL;
	err = find_release(g->gmem, g->release);
	if (!err)
		err = open_kernel(g, opts);
	if (err) {
		/* Back to a bare machine: nothing half-found stays. */
		ivm_kernel_layout_destroy(g->layout);
		drop_tables(g);
		free(g->vmlinux);
		g->layout = NULL;
		g->vmlinux = NULL;
		g->from_memory = false;
		g->release[0] = '\0';
		for (size_t i = 0; i < g->nr_vcpus; i++)
			g->vcpus[i].cpu = -1;
		return err;
	}
	g->has_kernel = true;
	return NULL;
}

struct ivm_error *ivm_guest_modules(struct ivm_guest *guest,
				    const struct ivm_kmodules **ret)
{
	struct ivm_error *err;

	if (!guest->modules) {
		err = ivm_kmodules_read(guest->layout, guest->btf,
					&guest->modules);
		if (err)
			return err;
	}
	*ret = guest->modules;
	return NULL;
}

void ivm_guest_close(struct ivm_guest *g)
{
	if (!g)
		return;
	ivm_kmodules_destroy(g->modules);
	ivm_kernel_layout_destroy(g->layout);
	drop_tables(g);
	ivm_gmem_destroy(g->gmem);
	free(g->ram);
	ivm_qmp_destroy(g->qmp);
	free(g->vcpus);
	free(g->vmlinux);
	free(g->name);
	free(g);
}

