// SPDX-License-Identifier: MIT
/*
 * Making a kernel layout (kernel_layout.h): where the guest kernel is,
 * found once from guest memory, the vCPUs' registers, the kernel's
 * symbols and its BTF.
 */
#include <stdlib.h>
#include <string.h>

#include "gmem/x86_64_paging.h"
#include "kernel/kernel_layout_int.h"

#define SLIDE_ALIGN (2ull << 20)	/* smallest CONFIG_PHYSICAL_ALIGN */
#define SLIDE_RANGE (1ull << 30)	/* KERNEL_IMAGE_SIZE with KASLR */
/* End of the kernel image mapping (modules start here). */
#define KERNEL_MAP_END 0xffffffffc0000000ull
/* KPTI: the user copy of the page tables is the next 4 KiB page. */
#define PTI_USER_PGTABLE_BIT (1ull << 12)
/* Default direct-map bases when page_offset_base does not exist. */
#define PAGE_OFFSET_4LEVEL 0xffff888000000000ull
#define PAGE_OFFSET_5LEVEL 0xff11000000000000ull
/* 52-bit physical addresses: 2^40 4 KiB frames. */
#define MAX_PFN_LIMIT (1ull << 40)
#define BANNER_PREFIX "Linux version "
#define MAX_BANNER 1024

/* ---- KASLR slide ------------------------------------------------------- */

struct slide_search {
	struct ivm_kernel_layout *l;
	const struct ivm_kernel_layout_config *config;
	uint64_t banner_link, init_task_link;
	unsigned int banner_hits;	/* banners whose init_task did not fit */
};

/* Does the banner, and init_task's comm, sit at this slide under cr3? */
static bool slide_matches(struct slide_search *s, uint64_t cr3, bool la57,
			  uint64_t slide)
{
	struct ivm_kernel_layout *l = s->l;
	char buf[MAX_BANNER + 1], comm[8];
	size_t len = sizeof(BANNER_PREFIX) - 1;
	const char *want = BANNER_PREFIX;
	struct ivm_error *err;

	if (s->config->banner) {
		want = s->config->banner;
		len = strnlen(want, MAX_BANNER);
	}
	err = ivm_gmem_read_virt(l->gmem, cr3, la57, s->banner_link + slide,
				 buf, len);
	if (err) {
		ivm_error_destroy(err);
		return false;
	}
	if (memcmp(buf, want, len))
		return false;
	/*
	 * A stray copy of the banner (the log buffer holds one) could sit at
	 * a wrong candidate by chance; init_task's comm must agree too.
	 */
	err = ivm_gmem_read_virt(l->gmem, cr3, la57,
				 s->init_task_link + slide + l->off.task_comm,
				 comm, sizeof(comm));
	if (err || memcmp(comm, "swapper", 7)) {
		ivm_error_destroy(err);
		s->banner_hits++;
		return false;
	}
	return true;
}

static bool slide_scan(struct slide_search *s, uint64_t cr3, bool la57,
		       uint64_t *ret)
{
	uint64_t slide;

	if (s->config->has_slide_hint &&
	    slide_matches(s, cr3, la57, s->config->slide_hint)) {
		*ret = s->config->slide_hint;
		return true;
	}
	/* At most SLIDE_RANGE / SLIDE_ALIGN = 512 candidates. */
	for (slide = 0; slide < SLIDE_RANGE; slide += SLIDE_ALIGN) {
		if (s->banner_link + slide >= KERNEL_MAP_END)
			break;
		if (slide_matches(s, cr3, la57, slide)) {
			*ret = slide;
			return true;
		}
	}
	return false;
}

static bool regs_have_crs(const struct ivm_x86_regs *r)
{
	return (r->valid & IVM_X86_REGS_CRS) && (r->cr3 & ~0xfffull);
}

/* Was cr3 (as adjusted for pass pti) already scanned for a vCPU < n? */
static bool cr3_seen(const struct ivm_kernel_layout_config *c, size_t n,
		     uint64_t cr3, int pti)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const struct ivm_x86_regs *r = &c->vcpu_regs[i];
		uint64_t other = r->cr3;

		if (!regs_have_crs(r))
			continue;
		if (pti) {
			if (!(other & PTI_USER_PGTABLE_BIT))
				continue;
			other &= ~PTI_USER_PGTABLE_BIT;
		}
		if ((other & IVM_X86_64_PTE_ADDR_MASK) ==
		    (cr3 & IVM_X86_64_PTE_ADDR_MASK))
			return true;
	}
	return false;
}

static struct ivm_error *find_slide(struct ivm_kernel_layout *l,
				    const struct ivm_kernel_layout_config *c,
				    uint64_t *ret_cr3)
{
	struct slide_search s = { .l = l, .config = c };
	struct ivm_error *err;
	unsigned int tried = 0;
	size_t i;
	int pti;

	err = ivm_ksyms_lookup(c->ksyms, "linux_banner", &s.banner_link);
	if (!err)
		err = ivm_ksyms_lookup(c->ksyms, "init_task",
				       &s.init_task_link);
	if (err)
		return err;
	if (s.banner_link < IVM_KERNEL_START_MAP ||
	    s.banner_link >= KERNEL_MAP_END ||
	    s.init_task_link < IVM_KERNEL_START_MAP ||
	    s.init_task_link >= KERNEL_MAP_END)
		return ivm_error_create(IVM_ERROR_INVALID,
					"linux_banner or init_task is not in the kernel image mapping");
	/*
	 * Every address space maps the kernel, so any vCPU's CR3 will do;
	 * under KPTI a vCPU in user mode has the user copy, which maps
	 * almost nothing of the kernel: then try the kernel copy next to it.
	 */
	for (pti = 0; pti < 2; pti++) {
		for (i = 0; i < c->nr_vcpus; i++) {
			const struct ivm_x86_regs *r = &c->vcpu_regs[i];
			bool la57 = r->cr4 & IVM_X86_CR4_LA57;
			uint64_t cr3 = r->cr3;

			if (!regs_have_crs(r))
				continue;
			if (pti) {
				if (!(cr3 & PTI_USER_PGTABLE_BIT))
					continue;
				cr3 &= ~PTI_USER_PGTABLE_BIT;
			}
			/* Idle vCPUs often share one: scan each CR3 once. */
			if (cr3_seen(c, i, cr3, pti))
				continue;
			l->la57 = la57;
			tried++;
			if (slide_scan(&s, cr3, la57, &l->slide)) {
				*ret_cr3 = cr3;
				goto found;
			}
		}
	}
	if (!tried)
		return ivm_error_create(IVM_ERROR_INVALID,
					"no vCPU registers with a page-table root (CR3) to find the kernel with");
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"linux_banner not found at any KASLR slide (%u banner(s) without a matching init_task): wrong vmlinux, or the kernel has not booted yet",
				s.banner_hits);

found:
	if (c->has_slide_hint && c->slide_hint != l->slide)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"KASLR slide 0x%llx found by linux_banner disagrees with the hint 0x%llx",
					(unsigned long long)l->slide,
					(unsigned long long)c->slide_hint);
	return NULL;
}

/*
 * phys_base and the kernel page-table root.  The kernel's init_top_pgt
 * maps all of the kernel and is independent of which process a vCPU runs,
 * so it is what every later read uses.
 */
static struct ivm_error *find_kernel_cr3(struct ivm_kernel_layout *l,
					 uint64_t vcpu_cr3)
{
	struct ivm_x86_64_translation tr;
	uint64_t banner, addr, phys_base_derived, pgt;
	struct ivm_error *err;
	char buf[sizeof(BANNER_PREFIX) - 1];

	/* Where the banner really is gives phys_base without any symbol. */
	err = ivm_kernel_symbol(l, "linux_banner", &banner);
	if (!err)
		err = ivm_x86_64_translate(l->gmem, vcpu_cr3, l->la57, banner,
					   &tr);
	if (err)
		return ivm_error_wrap(err, "translating linux_banner");
	phys_base_derived = tr.pa - (banner - IVM_KERNEL_START_MAP);
	l->phys_base = phys_base_derived;
	if (symbol_opt(l, "phys_base", &addr)) {
		uint64_t value;

		err = ivm_gmem_read_virt(l->gmem, vcpu_cr3, l->la57, addr,
					 &value, sizeof(value));
		if (err)
			return ivm_error_wrap(err, "reading phys_base");
		if (value != phys_base_derived)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"phys_base is 0x%llx but linux_banner's mapping says 0x%llx",
						(unsigned long long)value,
						(unsigned long long)phys_base_derived);
	}
	l->cr3 = vcpu_cr3 & IVM_X86_64_PTE_ADDR_MASK;
	if (!symbol_opt(l, "init_top_pgt", &pgt) &&
	    !symbol_opt(l, "swapper_pg_dir", &pgt))
		return NULL;	/* keep the vCPU's: it maps the kernel too */
	if (pgt < IVM_KERNEL_START_MAP)
		return NULL;
	/* __pa_symbol(): image address - __START_KERNEL_map + phys_base. */
	addr = pgt - IVM_KERNEL_START_MAP + l->phys_base;
	err = ivm_gmem_read_virt(l->gmem, addr, l->la57, banner, buf,
				 sizeof(buf));
	if (!err && !memcmp(buf, BANNER_PREFIX, sizeof(buf)))
		l->cr3 = addr;
	ivm_error_destroy(err);
	return NULL;
}

/* ---- direct map, per-CPU ---------------------------------------------- */

static struct ivm_error *find_direct_map(struct ivm_kernel_layout *l)
{
	struct ivm_error *err;
	uint64_t addr, max_pfn;

	l->page_offset_base = l->la57 ? PAGE_OFFSET_5LEVEL : PAGE_OFFSET_4LEVEL;
	/* CONFIG_RANDOMIZE_MEMORY: the base is a variable. */
	if (symbol_opt(l, "page_offset_base", &addr)) {
		err = ivm_kernel_read_ptr(l, addr, "page_offset_base",
				&l->page_offset_base);
		if (err)
			return err;
	}
	if (l->page_offset_base & 0xfff)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"page_offset_base 0x%llx is not page aligned",
					(unsigned long long)l->page_offset_base);
	/* Without max_pfn there is no fast path, only page walks. */
	if (!symbol_opt(l, "max_pfn", &addr))
		return NULL;
	err = kread_u64(l, addr, &max_pfn);
	if (err)
		return ivm_error_wrap(err, "reading max_pfn");
	if (max_pfn == 0 || max_pfn > MAX_PFN_LIMIT ||
	    l->page_offset_base + (max_pfn << 12) < l->page_offset_base)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"implausible max_pfn 0x%llx",
					(unsigned long long)max_pfn);
	l->direct_map_end = l->page_offset_base + (max_pfn << 12);
	return NULL;
}

static struct ivm_error *find_per_cpu(struct ivm_kernel_layout *l)
{
	struct ivm_error *err;
	uint64_t addr, current_sym;
	uint32_t nr = 1;
	unsigned int cpu;

	if (symbol_opt(l, "nr_cpu_ids", &addr)) {
		err = ivm_kernel_read(l, addr, &nr, sizeof(nr));
		if (err)
			return ivm_error_wrap(err, "reading nr_cpu_ids");
	}
	if (nr == 0)
		return ivm_error_create(IVM_ERROR_PROTOCOL, "nr_cpu_ids is 0");
	/* A sane maximum; CPUs past it are not profiled. */
	if (nr > IVM_KERNEL_MAX_CPUS)
		nr = IVM_KERNEL_MAX_CPUS;
	l->nr_cpus = nr;
	l->per_cpu_offset = calloc(nr, sizeof(*l->per_cpu_offset));
	l->current_va = calloc(nr, sizeof(*l->current_va));
	l->current_pa = calloc(nr, sizeof(*l->current_pa));
	l->idle_task = calloc(nr, sizeof(*l->idle_task));
	if (!l->per_cpu_offset || !l->current_va || !l->current_pa ||
	    !l->idle_task)
		return &ivm_enomem;
	err = ivm_kernel_symbol(l, "__per_cpu_offset", &addr);
	if (err)
		return err;
	err = ivm_kernel_read(l, addr, l->per_cpu_offset,
			      nr * sizeof(*l->per_cpu_offset));
	if (err)
		return ivm_error_wrap(err, "reading __per_cpu_offset");
	for (cpu = 0; cpu < nr; cpu++)
		if (!is_kernel_ptr(l, l->per_cpu_offset[cpu]))
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"__per_cpu_offset[%u] is 0x%llx, not a kernel address",
						cpu,
						(unsigned long long)l->per_cpu_offset[cpu]);

	/* `current`: its own per-CPU variable, or inside pcpu_hot. */
	err = ivm_kernel_symbol(l, "current_task", &current_sym);
	if (err && l->off.pcpu_hot_current_task != IVM_KOFF_NONE &&
	    symbol_opt(l, "pcpu_hot", &current_sym)) {
		ivm_error_destroy(err);
		err = NULL;
		current_sym += l->off.pcpu_hot_current_task;
	}
	if (err)
		return ivm_error_wrap(err, "finding current task variable");
	for (cpu = 0; cpu < nr; cpu++) {
		struct ivm_x86_64_translation tr;
		uint64_t va = per_cpu_addr(l, current_sym, cpu), task;

		l->current_va[cpu] = va;
		err = ivm_kernel_read_ptr(l, va, "current task", &task);
		if (err)
			return ivm_error_wrap(err, "cpu %u", cpu);
		/*
		 * Translate once; the per-CPU area never moves.  A slot that
		 * straddles a page (impossible for an aligned pointer) keeps
		 * the virtual path.
		 */
		err = ivm_x86_64_translate(l->gmem, l->cr3, l->la57, va, &tr);
		if (err)
			return ivm_error_wrap(err, "translating cpu %u's current",
					      cpu);
		if ((va & (tr.page_size - 1)) <= tr.page_size - 8)
			l->current_pa[cpu] = tr.pa;
	}
	return NULL;
}

/*
 * APIC id of each CPU (per-CPU x86_cpu_to_apicid), so a vCPU can be mapped
 * to its guest CPU while it runs in user mode and its registers (HMP shows
 * no kernel GS base) name no per-CPU area.  Optional.
 */
static struct ivm_error *find_apic_ids(struct ivm_kernel_layout *l)
{
	uint64_t base;
	unsigned int cpu;

	l->apic_id = malloc(l->nr_cpus * sizeof(*l->apic_id));
	if (!l->apic_id)
		return &ivm_enomem;
	for (cpu = 0; cpu < l->nr_cpus; cpu++)
		l->apic_id[cpu] = IVM_KERNEL_NO_APIC_ID;
	if (!symbol_opt(l, "x86_cpu_to_apicid", &base))
		return NULL;
	for (cpu = 0; cpu < l->nr_cpus; cpu++) {
		uint16_t id;
		struct ivm_error *err;

		err = ivm_kernel_read(l, per_cpu_addr(l, base, cpu), &id,
				      sizeof(id));
		if (err) {
			ivm_error_destroy(err);
			continue;
		}
		/* BAD_APICID (0xffff): a CPU that never came up. */
		if (id != 0xffff)
			l->apic_id[cpu] = id;
	}
	return NULL;
}

/* Idle tasks are on no list: find them per CPU. */
static void find_idle_tasks(struct ivm_kernel_layout *l)
{
	uint64_t base = 0, member = 0;
	unsigned int cpu, nr = l->nr_cpus;

	if (symbol_opt(l, "idle_threads", &base)) {
		member = 0;
	} else if (l->off.rq_idle != IVM_KOFF_NONE &&
		   symbol_opt(l, "runqueues", &base)) {
		member = l->off.rq_idle;
	} else {
		nr = 0;		/* no per-CPU source: CPU 0's below only */
	}
	for (cpu = 0; cpu < nr; cpu++) {
		uint64_t task;
		struct ivm_error *err;

		err = ivm_kernel_read_ptr(l, per_cpu_addr(l, base + member, cpu),
				"idle task", &task);
		if (err) {
			/* Not fatal: pid 0 still tells an idle task. */
			ivm_error_destroy(err);
			continue;
		}
		l->idle_task[cpu] = task;
	}
	/* The boot CPU's idle task is init_task itself. */
	if (!l->idle_task[0])
		l->idle_task[0] = l->init_task;
}

static void compute_task_span(struct ivm_kernel_layout *l)
{
	const struct ivm_kernel_offsets *o = &l->off;
	const struct ivm_kernel_field f[] = {
		{ o->task_pid, 4 }, { o->task_tgid, 4 },
		{ o->task_comm, o->task_comm_size },
		{ o->task_state, o->task_state_size },
		{ o->task_flags, 4 }, { o->task_cpu, 4 },
		{ o->task_on_cpu, 4 },
		{ o->task_stack, 8 }, { o->task_mm, 8 },
		{ o->task_active_mm, 8 }, { o->task_nvcsw, 8 },
		{ o->task_nivcsw, 8 }, { o->task_signal, 8 },
		{ o->task_thread_sp, 8 }, { o->task_thread_fsbase, 8 },
	};

	ivm_kernel_fields_span(f, sizeof(f) / sizeof(f[0]), &l->task_span_lo,
			       &l->task_span_hi);
}

/* ---- create / destroy ------------------------------------------------- */

void ivm_kernel_layout_destroy(struct ivm_kernel_layout *layout)
{
	if (!layout)
		return;
	free(layout->per_cpu_offset);
	free(layout->current_va);
	free(layout->current_pa);
	free(layout->idle_task);
	free(layout->apic_id);
	free(layout->vcpu_cpu);
	free(layout);
}

struct ivm_error *ivm_kernel_layout_create(
	struct ivm_gmem *gmem, const struct ivm_kernel_layout_config *config,
	struct ivm_kernel_layout **ret)
{
	struct ivm_kernel_layout *l;
	struct ivm_error *err;
	uint64_t vcpu_cr3 = 0;
	size_t i;

	if (!config->btf || !config->ksyms ||
	    (config->nr_vcpus && !config->vcpu_regs))
		return ivm_error_create(IVM_ERROR_INVALID,
					"kernel layout needs BTF, symbols and vCPU registers");
	l = calloc(1, sizeof(*l));
	if (!l)
		return &ivm_enomem;
	l->gmem = gmem;
	l->btf = config->btf;
	l->ksyms = config->ksyms;
	err = ivm_kernel_offsets_from_btf(config->btf, &l->off);
	if (err)
		goto fail;
	compute_task_span(l);
	err = find_slide(l, config, &vcpu_cr3);
	if (!err)
		err = find_kernel_cr3(l, vcpu_cr3);
	if (!err)
		err = ivm_kernel_symbol(l, "init_task", &l->init_task);
	if (!err)
		err = find_direct_map(l);
	if (!err)
		err = find_per_cpu(l);
	if (!err)
		err = find_apic_ids(l);
	if (err)
		goto fail;
	find_idle_tasks(l);
	l->nr_vcpus = config->nr_vcpus;
	l->vcpu_cpu = calloc(l->nr_vcpus ? l->nr_vcpus : 1,
			     sizeof(*l->vcpu_cpu));
	if (!l->vcpu_cpu) {
		err = &ivm_enomem;
		goto fail;
	}
	for (i = 0; i < l->nr_vcpus; i++) {
		unsigned int cpu;
		struct ivm_error *e;

		e = ivm_kernel_cpu_from_regs(l, &config->vcpu_regs[i], &cpu);
		l->vcpu_cpu[i] = e ? -1 : (int)cpu;
		ivm_error_destroy(e);
	}
	*ret = l;
	return NULL;

fail:
	ivm_kernel_layout_destroy(l);
	return err;
}

