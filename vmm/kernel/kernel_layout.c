// SPDX-License-Identifier: MIT
/*
 * Finding the guest kernel's layout from the host.
 *
 * Everything the hot path needs is computed once at create: the slide, the
 * kernel's own page-table root, the per-CPU offsets, and for each CPU the
 * guest physical address of its `current` pointer, so that reading a
 * vCPU's current task costs one 8-byte physical read and no page walk.
 */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/hexnum.h"
#include "kernel/kernel_layout.h"
#include "gmem/x86_64_paging.h"

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

struct ivm_kernel_layout {
	struct ivm_gmem *gmem;
	const struct ivm_btf *btf;
	const struct ivm_ksyms *ksyms;
	struct ivm_kernel_offsets off;

	uint64_t slide;
	uint64_t phys_base;
	uint64_t cr3;
	bool la57;
	uint64_t page_offset_base;
	uint64_t direct_map_end;	/* 0: no physical fast path */
	uint64_t init_task;

	unsigned int nr_cpus;
	uint64_t *per_cpu_offset;
	uint64_t *current_va;		/* address of each CPU's current */
	uint64_t *current_pa;		/* its guest physical address, or 0 */
	uint64_t *idle_task;		/* 0 when unknown */
	uint32_t *apic_id;		/* IVM_KERNEL_NO_APIC_ID when unknown */
	int *vcpu_cpu;
	size_t nr_vcpus;

	/* The span of task_struct that ivm_kernel_read_task reads. */
	uint32_t task_span_lo, task_span_hi;
};

static bool is_kernel_ptr(const struct ivm_kernel_layout *l, uint64_t va)
{
	return (va >> 63) && ivm_x86_64_canonical(va, l->la57);
}

/* Run-time address of a link-time address (see ivm_kernel_symbol). */
static uint64_t runtime_addr(const struct ivm_kernel_layout *l, uint64_t addr)
{
	/*
	 * Only the kernel image is relocated.  Per-CPU symbols of zero-based
	 * per-CPU kernels (x86-64 before 6.15) are offsets into each CPU's
	 * area and stay as they are.
	 */
	return addr >= IVM_KERNEL_START_MAP ? addr + l->slide : addr;
}

/* Run-time address of an optional symbol: false (no error) when absent. */
static bool symbol_opt(const struct ivm_kernel_layout *l, const char *name,
		       uint64_t *ret)
{
	const struct ivm_ksym *sym = ivm_ksyms_find(l->ksyms, name);

	if (!sym)
		return false;
	*ret = runtime_addr(l, sym->addr);
	return true;
}

struct ivm_error *ivm_kernel_symbol(const struct ivm_kernel_layout *layout,
				    const char *name, uint64_t *ret)
{
	uint64_t addr;
	struct ivm_error *err = ivm_ksyms_lookup(layout->ksyms, name, &addr);

	if (err)
		return err;
	*ret = runtime_addr(layout, addr);
	return NULL;
}

struct ivm_error *ivm_kernel_read(const struct ivm_kernel_layout *layout,
				  uint64_t va, void *buf, size_t len)
{
	const struct ivm_kernel_layout *l = layout;

	/* The direct map is linear: skip the page walk. */
	if (l->direct_map_end && va >= l->page_offset_base &&
	    va < l->direct_map_end && len <= l->direct_map_end - va) {
		struct ivm_error *err;

		err = ivm_gmem_read_phys(l->gmem, va - l->page_offset_base,
					 buf, len);
		if (err && err->code == IVM_ERROR_FAULT)
			err->address += l->page_offset_base;
		return err;
	}
	return ivm_gmem_read_virt(l->gmem, l->cr3, l->la57, va, buf, len);
}

static struct ivm_error *layout_read(void *ctx, uint64_t va, void *buf,
				     size_t len)
{
	return ivm_kernel_read(ctx, va, buf, len);
}

void ivm_kernel_layout_reader(const struct ivm_kernel_layout *layout,
			      struct ivm_kmem_reader *ret)
{
	/* The reader's ctx is not const; ivm_kernel_read only reads it. */
	ret->read = layout_read;
	ret->ctx = (void *)layout;
}

struct ivm_error *ivm_kernel_translate(const struct ivm_kernel_layout *layout,
				       uint64_t va, uint64_t *pa,
				       uint64_t *contiguous)
{
	const struct ivm_kernel_layout *l = layout;
	struct ivm_x86_64_translation tr;
	struct ivm_error *err;

	if (l->direct_map_end && va >= l->page_offset_base &&
	    va < l->direct_map_end) {
		*pa = va - l->page_offset_base;
		*contiguous = IVM_X86_64_PAGE_SIZE_4K -
			      (va & (IVM_X86_64_PAGE_SIZE_4K - 1));
		return NULL;
	}
	err = ivm_x86_64_translate(l->gmem, l->cr3, l->la57, va, &tr);
	if (err)
		return err;
	*pa = tr.pa;
	*contiguous = tr.page_size - (va & (tr.page_size - 1));
	return NULL;
}

struct ivm_error *ivm_kernel_translate_range(const struct ivm_kernel_layout *layout,
					     uint64_t va, uint64_t len,
					     uint64_t *pa)
{
	uint64_t end = va + len, at, pa0, next, contiguous;
	struct ivm_error *err;

	if (end < va)
		return ivm_error_create(IVM_ERROR_INVALID,
					"0x%llx + %llu wraps",
					(unsigned long long)va,
					(unsigned long long)len);
	err = ivm_kernel_translate(layout, va, &pa0, &contiguous);
	for (at = va + contiguous; !err && at < end; at += contiguous) {
		err = ivm_kernel_translate(layout, at, &next, &contiguous);
		if (!err && next != pa0 + (at - va))
			return ivm_error_create(IVM_ERROR_NOT_FOUND,
						"0x%llx: %llu bytes not contiguous in guest physical memory",
						(unsigned long long)va,
						(unsigned long long)len);
	}
	if (err)
		return err;
	*pa = pa0;
	return NULL;
}

bool ivm_kernel_is_kernel_address(const struct ivm_kernel_layout *layout,
				  uint64_t va)
{
	return is_kernel_ptr(layout, va);
}

uint64_t ivm_kernel_current_pa(const struct ivm_kernel_layout *layout,
			       unsigned int cpu)
{
	return cpu < layout->nr_cpus ? layout->current_pa[cpu] : 0;
}

static struct ivm_error *kread_u64(const struct ivm_kernel_layout *l,
				   uint64_t va, uint64_t *ret)
{
	return ivm_kernel_read(l, va, ret, sizeof(*ret));
}

struct ivm_error *ivm_kernel_read_ptr(const struct ivm_kernel_layout *l,
				      uint64_t va, const char *what,
				      uint64_t *ret)
{
	struct ivm_error *err = kread_u64(l, va, ret);

	if (err)
		return ivm_error_wrap(err, "reading %s", what);
	if (!is_kernel_ptr(l, *ret))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s at 0x%llx is 0x%llx, not a kernel address",
					what, (unsigned long long)va,
					(unsigned long long)*ret);
	return NULL;
}

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

/* Address of per-CPU symbol sym (plus member offset) on cpu. */
static uint64_t per_cpu_addr(const struct ivm_kernel_layout *l,
			     uint64_t sym_runtime, unsigned int cpu)
{
	return sym_runtime + l->per_cpu_offset[cpu];
}

/* Address of member off of guest CPU cpu's struct rq (what: its name). */
static struct ivm_error *rq_member_va(const struct ivm_kernel_layout *layout,
				      unsigned int cpu, uint32_t off,
				      const char *what, uint64_t *ret)
{
	uint64_t runqueues;

	if (cpu >= layout->nr_cpus)
		return ivm_error_create(IVM_ERROR_INVALID,
					"guest CPU %u: the kernel has %u", cpu,
					layout->nr_cpus);
	if (off == IVM_KOFF_NONE || !symbol_opt(layout, "runqueues", &runqueues))
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"this kernel's run queues have no known %s",
					what);
	*ret = per_cpu_addr(layout, runqueues + off, cpu);
	return NULL;
}

struct ivm_error *ivm_kernel_cpu_switches_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret)
{
	return rq_member_va(layout, cpu, layout->off.rq_nr_switches,
			    "nr_switches", ret);
}

struct ivm_error *ivm_kernel_cpu_rq_clock_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret)
{
	return rq_member_va(layout, cpu, layout->off.rq_clock, "clock", ret);
}

struct ivm_error *ivm_kernel_cpu_rq_idle_stamp_va(
	const struct ivm_kernel_layout *layout, unsigned int cpu, uint64_t *ret)
{
	/* Offset 0 is the run queue's lock: an offset nobody filled in. */
	return rq_member_va(layout, cpu, layout->off.rq_idle_stamp ?
			    layout->off.rq_idle_stamp : IVM_KOFF_NONE,
			    "idle_stamp", ret);
}

struct ivm_error *ivm_kernel_cpu_switches(const struct ivm_kernel_layout *layout,
					  unsigned int cpu, uint64_t *ret)
{
	struct ivm_error *err;
	uint64_t va = 0;

	err = ivm_kernel_cpu_switches_va(layout, cpu, &va);
	if (err)
		return err;
	return kread_u64(layout, va, ret);
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

/* ---- getters ----------------------------------------------------------- */

uint64_t ivm_kernel_layout_slide(const struct ivm_kernel_layout *layout)
{
	return layout->slide;
}

uint64_t ivm_kernel_layout_phys_base(const struct ivm_kernel_layout *layout)
{
	return layout->phys_base;
}

uint64_t ivm_kernel_layout_cr3(const struct ivm_kernel_layout *layout)
{
	return layout->cr3;
}

bool ivm_kernel_layout_la57(const struct ivm_kernel_layout *layout)
{
	return layout->la57;
}

uint64_t ivm_kernel_layout_page_offset_base(
	const struct ivm_kernel_layout *layout)
{
	return layout->page_offset_base;
}

unsigned int ivm_kernel_layout_nr_cpus(const struct ivm_kernel_layout *layout)
{
	return layout->nr_cpus;
}

uint64_t ivm_kernel_layout_per_cpu_offset(
	const struct ivm_kernel_layout *layout, unsigned int cpu)
{
	return cpu < layout->nr_cpus ? layout->per_cpu_offset[cpu] : 0;
}

uint64_t ivm_kernel_layout_init_task(const struct ivm_kernel_layout *layout)
{
	return layout->init_task;
}

uint64_t ivm_kernel_layout_idle_task(const struct ivm_kernel_layout *layout,
				     unsigned int cpu)
{
	return cpu < layout->nr_cpus ? layout->idle_task[cpu] : 0;
}

int ivm_kernel_layout_vcpu_cpu(const struct ivm_kernel_layout *layout,
			       size_t vcpu)
{
	return vcpu < layout->nr_vcpus ? layout->vcpu_cpu[vcpu] : -1;
}

const struct ivm_kernel_offsets *
ivm_kernel_layout_offsets(const struct ivm_kernel_layout *layout)
{
	return &layout->off;
}

/* ---- per-sample calls -------------------------------------------------- */

static bool cpu_of_base(const struct ivm_kernel_layout *l, uint64_t base,
			unsigned int *ret)
{
	unsigned int cpu;

	if (!base)
		return false;
	for (cpu = 0; cpu < l->nr_cpus; cpu++) {
		if (l->per_cpu_offset[cpu] == base) {
			*ret = cpu;
			return true;
		}
	}
	return false;
}

/* The CPU of regs by GS base, without building an error (hot path). */
static bool cpu_of_regs(const struct ivm_kernel_layout *layout,
			const struct ivm_x86_regs *regs, unsigned int *ret)
{
	bool has_gs = regs->valid & IVM_X86_REGS_FS_GS_BASE;
	bool has_kgs = regs->valid & IVM_X86_REGS_KERNEL_GS_BASE;
	bool user = (regs->valid & IVM_X86_REGS_SEGMENTS) && (regs->cs & 3);
	uint64_t first = user ? regs->kernel_gs_base : regs->gs_base;
	uint64_t second = user ? regs->gs_base : regs->kernel_gs_base;
	bool has_first = user ? has_kgs : has_gs;
	bool has_second = user ? has_gs : has_kgs;

	return (has_first && cpu_of_base(layout, first, ret)) ||
	       (has_second && cpu_of_base(layout, second, ret));
}

struct ivm_error *ivm_kernel_cpu_from_regs(
	const struct ivm_kernel_layout *layout,
	const struct ivm_x86_regs *regs, unsigned int *ret)
{
	if (cpu_of_regs(layout, regs, ret))
		return NULL;
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"neither GS base 0x%llx nor kernel GS base 0x%llx is a per-CPU offset",
				(unsigned long long)regs->gs_base,
				(unsigned long long)regs->kernel_gs_base);
}

struct ivm_error *ivm_kernel_cpu_from_apic_id(
	const struct ivm_kernel_layout *layout, uint32_t apic_id,
	unsigned int *ret)
{
	unsigned int cpu;

	for (cpu = 0; cpu < layout->nr_cpus; cpu++) {
		if (layout->apic_id[cpu] == apic_id) {
			*ret = cpu;
			return NULL;
		}
	}
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"no guest CPU has APIC id %u", apic_id);
}

struct ivm_error *ivm_kernel_current_task(
	const struct ivm_kernel_layout *layout, unsigned int cpu,
	const struct ivm_x86_regs *regs, uint64_t *ret)
{
	const struct ivm_kernel_layout *l = layout;
	struct ivm_error *err;
	uint64_t task;

	if (cpu >= l->nr_cpus)
		return ivm_error_create(IVM_ERROR_INVALID,
					"cpu %u out of range (%u CPUs)", cpu,
					l->nr_cpus);
	if (regs) {
		unsigned int regs_cpu;

		/* No per-CPU base in the registers: nothing to check. */
		if (cpu_of_regs(l, regs, &regs_cpu) && regs_cpu != cpu)
			return ivm_error_create(IVM_ERROR_PROTOCOL,
						"vCPU registers are those of cpu %u, not cpu %u",
						regs_cpu, cpu);
	}
	if (l->current_pa[cpu])
		err = ivm_gmem_read_phys(l->gmem, l->current_pa[cpu], &task,
					 sizeof(task));
	else
		err = kread_u64(l, l->current_va[cpu], &task);
	if (err)
		return ivm_error_wrap(err, "reading cpu %u's current task",
				      cpu);
	if (!is_kernel_ptr(l, task))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"cpu %u's current task 0x%llx is not a kernel address",
					cpu, (unsigned long long)task);
	*ret = task;
	return NULL;
}

struct ivm_error *ivm_kernel_read_task(const struct ivm_kernel_layout *layout,
				       uint64_t task,
				       struct ivm_guest_task *ret)
{
	const struct ivm_kernel_layout *l = layout;
	const struct ivm_kernel_offsets *o = &l->off;
	uint32_t lo = l->task_span_lo, span = l->task_span_hi - lo;
	struct ivm_error *err;
	size_t comm_len;
	uint8_t *buf;
	unsigned int cpu;

	if (!is_kernel_ptr(l, task) || task + l->task_span_hi < task)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task 0x%llx is not a kernel address",
					(unsigned long long)task);
	buf = malloc(span);
	if (!buf)
		return &ivm_enomem;
	err = ivm_kernel_read(l, task + lo, buf, span);
	if (err) {
		free(buf);
		return ivm_error_wrap(err, "reading task 0x%llx",
				      (unsigned long long)task);
	}
#define AT(off) (buf + (off) - lo)
	memset(ret, 0, sizeof(*ret));
	ret->addr = task;
	ret->pid = (int32_t)ivm_le32(AT(o->task_pid));
	ret->tgid = (int32_t)ivm_le32(AT(o->task_tgid));
	/* The guest need not NUL-terminate comm; we always do. */
	comm_len = o->task_comm_size < sizeof(ret->comm) ?
			   o->task_comm_size : sizeof(ret->comm) - 1;
	memcpy(ret->comm, AT(o->task_comm), comm_len);
	ret->comm[comm_len < sizeof(ret->comm) ? comm_len :
						 sizeof(ret->comm) - 1] = '\0';
	ret->state = o->task_state_size == 8 ? ivm_le64(AT(o->task_state)) :
					       ivm_le32(AT(o->task_state));
	ret->flags = ivm_le32(AT(o->task_flags));
	ret->cpu = ivm_le32(AT(o->task_cpu));
	if (o->task_on_cpu != IVM_KOFF_NONE)
		ret->on_cpu = ivm_le32(AT(o->task_on_cpu)) != 0;
	ret->stack = ivm_le64(AT(o->task_stack));
	ret->mm = ivm_le64(AT(o->task_mm));
	if (o->task_active_mm != IVM_KOFF_NONE)
		ret->active_mm = ivm_le64(AT(o->task_active_mm));
	ret->nvcsw = ivm_le64(AT(o->task_nvcsw));
	ret->nivcsw = ivm_le64(AT(o->task_nivcsw));
	ret->signal = ivm_le64(AT(o->task_signal));
	ret->thread_sp = ivm_le64(AT(o->task_thread_sp));
	if (o->task_thread_fsbase != IVM_KOFF_NONE)
		ret->fsbase = ivm_le64(AT(o->task_thread_fsbase));
#undef AT
	free(buf);
	for (cpu = 0; cpu < l->nr_cpus; cpu++) {
		if (l->idle_task[cpu] == task) {
			ret->is_idle = true;
			break;
		}
	}
	return NULL;
}

struct ivm_error *ivm_kernel_task_user_cr3(
	const struct ivm_kernel_layout *layout,
	const struct ivm_guest_task *task, uint64_t *ret)
{
	struct ivm_error *err;
	uint64_t pgd, pa, contiguous;

	if (!task->mm)
		return ivm_error_create(IVM_ERROR_NOT_FOUND,
					"task %d (%s) is a kernel thread: no mm",
					task->pid, task->comm);
	if (!is_kernel_ptr(layout, task->mm))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task %d: mm 0x%llx is not a kernel address",
					task->pid,
					(unsigned long long)task->mm);
	err = ivm_kernel_read_ptr(layout, task->mm + layout->off.mm_pgd, "mm->pgd",
			&pgd);
	/*
	 * A pgd comes from the page allocator, so it is in the direct map:
	 * translated by arithmetic, not a four-read walk, on every capture.
	 * A pa outside guest RAM faults when the user walk reads it.
	 */
	if (!err)
		err = ivm_kernel_translate(layout, pgd, &pa, &contiguous);
	if (err)
		return ivm_error_wrap(err, "task %d: user page tables",
				      task->pid);
	if (pa & 0xfff)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"task %d: pgd 0x%llx is not page aligned",
					task->pid, (unsigned long long)pgd);
	*ret = pa;
	return NULL;
}

/* ---- task list --------------------------------------------------------- */

struct task_walk {
	const struct ivm_kernel_layout *l;
	struct ivm_guest_task_list *list;
	size_t max;
	size_t cap;		/* room in list->tasks */
	uint64_t *seen;		/* open addressing set of task addresses */
	size_t seen_mask;	/* its size - 1: a power of two, over 2 * cap */
};

/*
 * Room for the walk starts small and doubles, so that a guest with a
 * hundred tasks does not cost a walk the cap's megabytes (65,536 tasks
 * are 11 MiB, zeroed at every walk, kept resident by malloc).
 */
#define WALK_FIRST_CAP 256

static bool seen_insert(struct task_walk *w, uint64_t task);

/* Double the room for tasks (and the set); false without memory. */
static bool walk_grow(struct task_walk *w)
{
	size_t cap = w->cap * 2, old_size = w->seen_mask + 1, size, i;
	struct ivm_guest_task *tasks;
	uint64_t *old = w->seen;

	if (cap > w->max)
		cap = w->max;
	tasks = realloc(w->list->tasks, cap * sizeof(*tasks));
	if (!tasks)
		return false;
	/* As calloc gave them: a field the kernel lacks reads 0. */
	memset(tasks + w->cap, 0, (cap - w->cap) * sizeof(*tasks));
	w->list->tasks = tasks;
	w->cap = cap;
	if (old_size >= 2 * cap)
		return true;		/* the set still has room */
	for (size = old_size; size < 2 * cap; size <<= 1)
		;
	w->seen = calloc(size, sizeof(*w->seen));
	if (!w->seen) {
		w->seen = old;
		return false;
	}
	w->seen_mask = size - 1;
	for (i = 0; i < old_size; i++)
		if (old[i])
			seen_insert(w, old[i]);
	free(old);
	return true;
}

/* Insert task; false if it was already there. */
static bool seen_insert(struct task_walk *w, uint64_t task)
{
	size_t i = ivm_hash_addr(task) & w->seen_mask;

	/* The set has twice the room of the tasks it holds, so this ends. */
	while (w->seen[i]) {
		if (w->seen[i] == task)
			return false;
		i = (i + 1) & w->seen_mask;
	}
	w->seen[i] = task;
	return true;
}

static bool seen_contains(const struct task_walk *w, uint64_t task)
{
	size_t i = ivm_hash_addr(task) & w->seen_mask;

	while (w->seen[i]) {
		if (w->seen[i] == task)
			return true;
		i = (i + 1) & w->seen_mask;
	}
	return false;
}

static void walk_stop(struct task_walk *w, struct ivm_error *err)
{
	w->list->truncated = true;
	if (!w->list->error)
		w->list->error = err;
	else
		ivm_error_destroy(err);
}

/*
 * Add task to the list.  Returns false when the walk must stop (cap, cycle
 * or fault; recorded in the list).
 */
static bool walk_add(struct task_walk *w, uint64_t task)
{
	struct ivm_guest_task_list *list = w->list;
	struct ivm_error *err;

	if (list->nr >= w->max) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "more than %zu tasks: list cut",
					      w->max));
		return false;
	}
	if (list->nr == w->cap && !walk_grow(w)) {
		walk_stop(w, &ivm_enomem);
		return false;
	}
	if (!seen_insert(w, task)) {
		walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
					      "task list loops back to task 0x%llx",
					      (unsigned long long)task));
		return false;
	}
	err = ivm_kernel_read_task(w->l, task, &list->tasks[list->nr]);
	if (err) {
		walk_stop(w, err);
		return false;
	}
	list->nr++;
	return true;
}

static bool walk_next(struct task_walk *w, uint64_t node, uint64_t *ret)
{
	struct ivm_error *err;

	err = ivm_kernel_read_ptr(w->l, node + w->l->off.list_head_next,
			"list_head.next", ret);
	if (err) {
		walk_stop(w, err);
		return false;
	}
	return true;
}

/* The threads of the process whose leader is list->tasks[idx]. */
static bool walk_threads(struct task_walk *w, size_t idx)
{
	const struct ivm_kernel_offsets *o = &w->l->off;
	uint64_t leader = w->list->tasks[idx].addr;
	uint64_t head, node, link_off;
	unsigned int leader_passes = 0;

	if (o->signal_thread_head != IVM_KOFF_NONE) {
		uint64_t signal = w->list->tasks[idx].signal;

		/* Exiting tasks may have no signal struct any more. */
		if (!signal)
			return true;
		if (!is_kernel_ptr(w->l, signal)) {
			walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
						      "task 0x%llx: signal 0x%llx is not a kernel address",
						      (unsigned long long)leader,
						      (unsigned long long)signal));
			return false;
		}
		head = signal + o->signal_thread_head;
		link_off = o->task_thread_node;
	} else {
		head = leader + o->task_thread_group;
		link_off = o->task_thread_group;
	}
	if (!walk_next(w, head, &node))
		return false;
	/*
	 * Bounded: every step adds a task (at most w->max, each once) or
	 * passes the leader, which a sane ring does at most once.
	 */
	while (node != head) {
		uint64_t task = node - link_off;

		if (task == leader) {
			if (leader_passes++) {
				walk_stop(w, ivm_error_create(IVM_ERROR_PROTOCOL,
							      "thread list of task 0x%llx loops",
							      (unsigned long long)leader));
				return false;
			}
		} else if (!walk_add(w, task)) {
			return false;
		}
		if (!walk_next(w, node, &node))
			return false;
	}
	return true;
}

struct ivm_error *ivm_kernel_task_list(const struct ivm_kernel_layout *layout,
				       size_t max_tasks,
				       struct ivm_guest_task_list **ret)
{
	const struct ivm_kernel_layout *l = layout;
	struct task_walk w = { .l = l };
	struct ivm_guest_task_list *list;
	uint64_t head, node;
	size_t set_size = 1;
	unsigned int cpu;

	if (max_tasks == 0)
		max_tasks = IVM_KERNEL_DEFAULT_MAX_TASKS;
	if (max_tasks > IVM_KERNEL_MAX_TASKS)
		max_tasks = IVM_KERNEL_MAX_TASKS;
	w.max = max_tasks;
	w.cap = max_tasks < WALK_FIRST_CAP ? max_tasks : WALK_FIRST_CAP;
	while (set_size < 2 * w.cap)
		set_size <<= 1;
	list = calloc(1, sizeof(*list));
	w.seen = calloc(set_size, sizeof(*w.seen));
	if (list)
		list->tasks = calloc(w.cap, sizeof(*list->tasks));
	if (!list || !w.seen || !list->tasks) {
		ivm_guest_task_list_destroy(list);
		free(w.seen);
		return &ivm_enomem;
	}
	w.seen_mask = set_size - 1;
	w.list = list;

	/* init_task (pid 0) heads the process list and is no member of it. */
	if (!walk_add(&w, l->init_task))
		goto idle;
	head = l->init_task + l->off.task_tasks;
	if (!walk_next(&w, head, &node))
		goto idle;
	while (node != head) {
		size_t leader_idx = list->nr;

		if (!walk_add(&w, node - l->off.task_tasks))
			break;
		if (!walk_threads(&w, leader_idx))
			break;
		if (!walk_next(&w, list->tasks[leader_idx].addr +
					   l->off.task_tasks, &node))
			break;
	}
idle:
	/* Idle tasks of the other CPUs are on no list. */
	for (cpu = 0; cpu < l->nr_cpus; cpu++) {
		uint64_t idle = l->idle_task[cpu];

		if (idle && !seen_contains(&w, idle) && !walk_add(&w, idle))
			break;
	}
	free(w.seen);
	*ret = list;
	return NULL;
}

void ivm_guest_task_list_destroy(struct ivm_guest_task_list *list)
{
	if (!list)
		return;
	ivm_error_destroy(list->error);
	free(list->tasks);
	free(list);
}

/* ---- VMCOREINFO -------------------------------------------------------- */

struct ivm_error *ivm_kernel_vmcoreinfo_offset(const char *vmcoreinfo,
					       uint64_t *ret)
{
	static const char key[] = "KERNELOFFSET=";
	/* VMCOREINFO is one page in the kernel; be generous, but bounded. */
	size_t len = strnlen(vmcoreinfo, 1u << 20), pos = 0;

	while (pos < len) {
		const char *line = vmcoreinfo + pos;
		const char *nl = memchr(line, '\n', len - pos);
		size_t line_len = nl ? (size_t)(nl - line) : len - pos;

		pos += line_len + 1;
		if (line_len > sizeof(key) - 1 &&
		    !memcmp(line, key, sizeof(key) - 1)) {
			const char *p = line + sizeof(key) - 1;
			size_t n = line_len - (sizeof(key) - 1), i;
			uint64_t v = 0;

			if (n > 16)
				break;
			for (i = 0; i < n; i++) {
				char c = p[i];
				int d;

				if (c >= '0' && c <= '9')
					d = c - '0';
				else if (c >= 'a' && c <= 'f')
					d = c - 'a' + 10;
				else if (c >= 'A' && c <= 'F')
					d = c - 'A' + 10;
				else
					goto bad;
				v = v << 4 | (uint64_t)d;
			}
			*ret = v;
			return NULL;
		}
	}
	return ivm_error_create(IVM_ERROR_NOT_FOUND,
				"VMCOREINFO has no KERNELOFFSET");
bad:
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"VMCOREINFO KERNELOFFSET is not hexadecimal");
}
