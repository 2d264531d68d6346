// SPDX-License-Identifier: MIT
/*
 * The VMA walk over synthetic guest memory: maple trees laid out with the
 * guest's real 6.1 BTF (when the image cache has its vmlinux) and with a
 * hand-built BTF of other offsets and smaller nodes, the VMA list of older
 * kernels, paths across mounts, deleted and pseudo files — then broken:
 * faults, cycles, absurd counts, wrong node types, dead nodes, forged
 * ranges.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "base/bytes.h"
#include "synth_mm.h"

/* The VMAs of w's mm, at most max (0: the default). */
static struct ivm_mm_maps *walk(struct sworld *w, size_t max)
{
	struct ivm_mm_maps *maps = NULL;
	struct ivm_error *err = ivm_mm_maps_read(&w->src, w->mm, max, &maps);

	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	return maps;
}

Test(mm_maps, offsets_of_debian_6_1)
{
	struct ivm_btf *btf = synth_real_btf();
	struct ivm_mm_offsets o;
	struct ivm_error *err;

	if (!btf)
		cr_skip_test("%s absent: run make image", SYNTH_VMLINUX);
	err = ivm_mm_offsets_from_btf(btf, &o);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	/* pahole of this exact build (6.1.0-56-cloud-amd64). */
	cr_expect_eq(o.mm_mt_root, 8);
	cr_expect_eq(o.mm_mmap, IVM_KOFF_NONE);
	cr_expect_eq(o.vma_start, 0);
	cr_expect_eq(o.vma_end, 8);
	cr_expect_eq(o.vma_flags, 32);
	cr_expect_eq(o.vma_anon_vma, 88);
	cr_expect_eq(o.vma_pgoff, 104);
	cr_expect_eq(o.vma_file, 112);
	cr_expect_eq(o.maple_node_size, 256);
	cr_expect_eq(o.mr64_pivot, 8);
	cr_expect_eq(o.mr64_slot, 128);
	cr_expect_eq(o.mr64_nr_slots, 16);
	cr_expect_eq(o.mr64_meta_end, 248);
	cr_expect_eq(o.ma64_pivot, 8);
	cr_expect_eq(o.ma64_slot, 80);
	cr_expect_eq(o.ma64_nr_slots, 10);
	cr_expect_eq(o.ma64_meta_end, 240);
	cr_expect_eq(o.dense_slot, 8);
	cr_expect_eq(o.dense_nr_slots, 31);
	cr_expect_eq(o.maple_leaf_64, 1);
	cr_expect_eq(o.maple_arange_64, 3);
	cr_expect_eq(o.file_inode, 32);
	cr_expect_eq(o.file_dentry, 24);
	cr_expect_eq(o.dentry_parent, 24);
	cr_expect_eq(o.dentry_name, 40);
	cr_expect_eq(o.inode_ino, 64);
	cr_expect_eq(o.inode_generation, 592);
	cr_expect_eq(o.sb_dev, 16);
	cr_expect_eq(o.mount_mnt, 32);
	cr_expect_eq(o.mount_parent, 16);
}

Test(mm_maps, list_layout_offsets)
{
	struct ivm_btf *btf = synth_hand_btf(true);
	struct ivm_mm_offsets o;
	struct ivm_error *err;

	err = ivm_mm_offsets_from_btf(btf, &o);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_expect_eq(o.mm_mt_root, IVM_KOFF_NONE);
	cr_expect_eq(o.mm_mmap, 0x20);
	cr_expect_eq(o.vma_next, 0x98);
	cr_expect_eq(o.vma_start, 0x30);
	ivm_btf_destroy(btf);
}

/* ---- a process with one of everything ---------------------------------- */

struct everything {
	uint64_t vmas[12];
	size_t n;
	uint64_t exe_file;
};

#define SPECIAL_VMOPS 0xffffffff82000000ull
#define ANON_INODE_DNAME 0xffffffff81300000ull
#define SIMPLE_DNAME 0xffffffff81310000ull

static void build_everything(struct sworld *w, struct everything *e)
{
	uint64_t bin, prog, dev, shm, shm_root, x, gone, m2, lib, pseudo, ops;
	uint64_t ai, aiops, sm, name;
	struct sw_file fprog, fx, fgone, fmemfd, fai;

	w->src.special_vmops = SPECIAL_VMOPS;
	w->src.anon_inode_dname = ANON_INODE_DNAME;
	bin = sw_dentry(w, w->root_dentry, "bin");
	prog = sw_dentry(w, bin, "prog");
	fprog = sw_file(w, w->root_mount, prog, 47, 2, 0x5000);
	dev = sw_dentry(w, w->root_dentry, "dev");
	/* /dev is a mount of its own, /dev/shm another on top of it. */
	m2 = sw_mount(w, w->root_mount, dev, &lib);
	shm = sw_dentry(w, lib, "shm");
	shm = sw_mount(w, m2, shm, &shm_root);
	x = sw_dentry(w, shm_root, "ivm-shared.bin");
	fx = sw_file(w, shm, x, 2, 0x16, 0x2000);
	gone = sw_dentry(w, sw_dentry(w, w->root_dentry, "tmp"), "gone.bin");
	skm_w64(&w->k, gone + w->o->dentry_hash_pprev, 0);
	fgone = sw_file(w, w->root_mount, gone, 312, 2, 0x1000);
	/* A memfd: a dentry on no directory, named by simple_dname. */
	ops = skm_alloc(&w->k, 0x100, 64);
	skm_w64(&w->k, ops + w->o->dentry_op_dname, SIMPLE_DNAME);
	pseudo = sw_dentry(w, 0, "memfd:ivm-memfd");
	skm_w64(&w->k, pseudo + w->o->dentry_op, ops);
	fmemfd = sw_file(w, shm, pseudo, 3, 1, 0x1000);
	aiops = skm_alloc(&w->k, 0x100, 64);
	skm_w64(&w->k, aiops + w->o->dentry_op_dname, ANON_INODE_DNAME);
	ai = sw_dentry(w, 0, "[perf_event]");
	skm_w64(&w->k, ai + w->o->dentry_op, aiops);
	fai = sw_file(w, shm, ai, 4, 13, 0);
	e->exe_file = fprog.file;
	skm_w64(&w->k, w->mm + w->o->mm_exe_file, fprog.file);
	sw_brk(w, 0x600000, 0x621000, 0x7ffd00010000);

	e->n = 0;
	e->vmas[e->n++] = sw_vma(w, 0x400000, 0x401000, SW_R, 0, fprog.file);
	e->vmas[e->n++] = sw_vma(w, 0x401000, 0x47c000, SW_R | SW_X, 1,
				 fprog.file);
	e->vmas[e->n] = sw_vma(w, 0x4a8000, 0x4ab000, SW_R | SW_W, 0xa8,
			       fprog.file);
	skm_w64(&w->k, e->vmas[e->n++] + w->o->vma_anon_vma,
		0xffff888012345600ull);
	e->vmas[e->n++] = sw_vma(w, 0x600000, 0x622000, SW_R | SW_W, 0, 0);
	e->vmas[e->n++] = sw_vma(w, 0x7f0000000000, 0x7f0000001000,
				 SW_R | SW_W | SW_MAYSHARE, 0, fmemfd.file);
	e->vmas[e->n++] = sw_vma(w, 0x7f0000001000, 0x7f0000003000,
				 SW_R | SW_W | SW_MAYSHARE, 0, fx.file);
	e->vmas[e->n++] = sw_vma(w, 0x7f0000003000, 0x7f0000004000, SW_R, 0,
				 fgone.file);
	e->vmas[e->n++] = sw_vma(w, 0x7f0000004000, 0x7f0000005000, SW_R, 0,
				 fai.file);
	e->vmas[e->n] = sw_vma(w, 0x7f0000005000, 0x7f0000007000,
			       SW_R | SW_W, 0, 0);
	if (w->o->vma_anon_name != IVM_KOFF_NONE) {
		name = skm_alloc(&w->k, 64, 8);
		memcpy(skm_at(&w->k, name + w->o->anon_vma_name_name, 9),
		       "ivm-anon", 9);
		skm_w64(&w->k, e->vmas[e->n] + w->o->vma_anon_name, name);
	}
	e->n++;
	e->vmas[e->n++] = sw_vma(w, 0x7ffd00000000, 0x7ffd00021000,
				 SW_R | SW_W, 0, 0);
	e->vmas[e->n] = sw_vma(w, 0x7ffd00100000, 0x7ffd00102000,
			       SW_R | SW_X, 0, 0);
	sm = skm_alloc(&w->k, 0x40, 64);
	skm_w64(&w->k, sm + w->o->special_mapping_name, sw_string(w, "[vdso]"));
	skm_w64(&w->k, e->vmas[e->n] + w->o->vma_ops, SPECIAL_VMOPS);
	skm_w64(&w->k, e->vmas[e->n++] + w->o->vma_private_data, sm);
}

/* What /proc/PID/maps would print for build_everything's process. */
static void check_everything(struct sworld *w, struct ivm_mm_maps *maps)
{
	static const struct {
		uint64_t start, end, pgoff;
		uint32_t prot;
		uint64_t ino, dev;
		const char *path, *name;
	} want[] = {
		{ 0x400000, 0x401000, 0, IVM_VMA_READ, 47, 2, "/bin/prog",
		  NULL },
		{ 0x401000, 0x47c000, 0x1000, IVM_VMA_READ | IVM_VMA_EXEC,
		  47, 2, "/bin/prog", NULL },
		{ 0x4a8000, 0x4ab000, 0xa8000,
		  IVM_VMA_READ | IVM_VMA_WRITE | IVM_VMA_ANON_PAGES, 47, 2,
		  "/bin/prog", NULL },
		{ 0x600000, 0x622000, 0, IVM_VMA_READ | IVM_VMA_WRITE, 0, 0,
		  NULL, "[heap]" },
		{ 0x7f0000000000, 0x7f0000001000, 0,
		  IVM_VMA_READ | IVM_VMA_WRITE | IVM_VMA_SHARED, 3, 1,
		  "/memfd:ivm-memfd (deleted)", NULL },
		{ 0x7f0000001000, 0x7f0000003000, 0,
		  IVM_VMA_READ | IVM_VMA_WRITE | IVM_VMA_SHARED, 2, 0x16,
		  "/dev/shm/ivm-shared.bin", NULL },
		{ 0x7f0000003000, 0x7f0000004000, 0, IVM_VMA_READ, 312, 2,
		  "/tmp/gone.bin (deleted)", NULL },
		{ 0x7f0000004000, 0x7f0000005000, 0, IVM_VMA_READ, 4, 13,
		  "anon_inode:[perf_event]", NULL },
		{ 0x7f0000005000, 0x7f0000007000, 0,
		  IVM_VMA_READ | IVM_VMA_WRITE, 0, 0, NULL, "[anon:ivm-anon]" },
		{ 0x7ffd00000000, 0x7ffd00021000, 0,
		  IVM_VMA_READ | IVM_VMA_WRITE, 0, 0, NULL, "[stack]" },
		{ 0x7ffd00100000, 0x7ffd00102000, 0,
		  IVM_VMA_READ | IVM_VMA_EXEC, 0, 0, NULL, "[vdso]" },
	};
	const char *exe_path;
	size_t i;

	cr_assert_null(ivm_mm_maps_truncated(maps), "%s",
		       ivm_error_string(ivm_mm_maps_truncated(maps)));
	cr_assert_eq(ivm_mm_maps_count(maps), sizeof(want) / sizeof(want[0]));
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct ivm_vma *v = ivm_mm_maps_get(maps, i);
		const char *name = want[i].name;

		if (name && !strcmp(name, "[anon:ivm-anon]") &&
		    w->o->vma_anon_name == IVM_KOFF_NONE)
			name = NULL;
		cr_expect_eq(v->start, want[i].start, "vma %zu start", i);
		cr_expect_eq(v->end, want[i].end, "vma %zu end", i);
		cr_expect_eq(v->pgoff, want[i].pgoff, "vma %zu pgoff", i);
		cr_expect_eq(v->prot, want[i].prot, "vma %zu prot %#x", i,
			     v->prot);
		cr_expect_eq(v->file.ino, want[i].ino, "vma %zu ino", i);
		cr_expect_eq(v->file.dev, want[i].dev, "vma %zu dev", i);
		cr_expect_eq(ivm_vma_is_file(v), want[i].path != NULL);
		if (want[i].path) {
			cr_expect_str_eq(v->path, want[i].path);
			cr_expect_eq(v->path_state, IVM_VMA_PATH_FULL);
			cr_expect_neq(v->file.mapping, 0);
		} else {
			cr_expect_null(v->path);
		}
		if (name)
			cr_expect_str_eq(v->name, name, "vma %zu", i);
		else
			cr_expect_null(v->name, "vma %zu: %s", i, v->name);
	}
	cr_expect_eq(ivm_mm_maps_get(maps, 2)->file.generation,
		     w->o->inode_generation != IVM_KOFF_NONE ? 47 * 3 : 0);
	cr_expect_eq(ivm_mm_maps_get(maps, 2)->file.size, 0x5000);
	cr_assert_not_null(ivm_mm_maps_exe(maps, &exe_path));
	cr_expect_str_eq(exe_path, "/bin/prog");
	cr_expect_eq(ivm_mm_maps_exe(maps, NULL)->ino, 47);
	cr_expect_eq(ivm_mm_maps_find(maps, 0x401fff)->start, 0x401000);
	cr_expect_null(ivm_mm_maps_find(maps, 0x47c000));
	cr_expect_null(ivm_mm_maps_find(maps, 0x3fffff));
}

Test(mm_maps, maple_one_of_everything)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b, fill;

	for (b = 0; b < nb; b++) {
		for (fill = 2; fill <= 6; fill += 4) {
			struct sworld w;
			struct everything e;
			struct ivm_mm_maps *maps;

			sw_init(&w, btfs[b]);
			build_everything(&w, &e);
			sw_maple(&w, e.vmas, e.n, fill, 3);
			maps = walk(&w, 0);
			check_everything(&w, maps);
			ivm_mm_maps_destroy(maps);
			sw_fini(&w);
		}
	}
}

Test(mm_maps, list_one_of_everything)
{
	struct ivm_btf *btf = synth_hand_btf(true);
	struct everything e;
	struct ivm_mm_maps *maps;
	struct sworld w;

	sw_init(&w, btf);
	build_everything(&w, &e);
	sw_list(&w, e.vmas, e.n);
	maps = walk(&w, 0);
	check_everything(&w, maps);
	ivm_mm_maps_destroy(maps);
	sw_fini(&w);
	ivm_btf_destroy(btf);
}

Test(mm_maps, empty_tree)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b;

	for (b = 0; b < nb; b++) {
		struct ivm_mm_maps *maps;
		struct sworld w;
		struct ivm_vma v;
		struct ivm_error *err;

		sw_init(&w, btfs[b]);
		maps = walk(&w, 0);
		cr_expect_eq(ivm_mm_maps_count(maps), 0);
		cr_expect_null(ivm_mm_maps_truncated(maps));
		cr_expect_null(ivm_mm_maps_exe(maps, NULL));
		ivm_mm_maps_destroy(maps);
		err = ivm_mm_vma_at(&w.src, w.mm, 0x400000, &v);
		cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
		ivm_error_destroy(err);
		sw_fini(&w);
	}
}

Test(mm_maps, mm_not_a_kernel_address)
{
	struct ivm_mm_maps *maps = NULL;
	struct ivm_error *err;
	struct sworld w;

	sw_init(&w, synth_hand_btf(false));
	err = ivm_mm_maps_read(&w.src, 0x1234000, 0, &maps);
	cr_expect(err && err->code == IVM_ERROR_PROTOCOL);
	cr_expect_null(maps);
	ivm_error_destroy(err);
	ivm_btf_destroy(w.btf);
	sw_fini(&w);
}

/* ---- many VMAs: several levels ------------------------------------------ */

#define MANY 300

/* MANY VMAs of 2 pages with 1-page gaps, every third a file mapping. */
static void build_many(struct sworld *w, uint64_t *vmas)
{
	struct sw_file f;
	size_t i;

	f = sw_file(w, w->root_mount, sw_dentry(w, w->root_dentry, "data"),
		    9, 2, 1 << 20);
	for (i = 0; i < MANY; i++) {
		uint64_t s = 0x10000000 + i * 0x3000;

		vmas[i] = sw_vma(w, s, s + 0x2000, SW_R, i, i % 3 ? 0 : f.file);
	}
}

Test(mm_maps, maple_many_levels)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b, i;
	uint64_t vmas[MANY];

	for (b = 0; b < 2 * nb; b++) {
		struct ivm_mm_maps *maps;
		struct ivm_error *err;
		struct sworld w;
		struct ivm_vma v;

		sw_init(&w, btfs[b / 2]);
		build_many(&w, vmas);
		if (b % 2)	/* full nodes, as the kernel packs them */
			sw_maple(&w, vmas, MANY, w.o->mr64_nr_slots,
				 w.o->ma64_nr_slots);
		else		/* 3 ranges a leaf, 2 children a node: 9 levels */
			sw_maple(&w, vmas, MANY, 3, 2);
		maps = walk(&w, 0);
		cr_assert_null(ivm_mm_maps_truncated(maps), "%s",
			       ivm_error_string(ivm_mm_maps_truncated(maps)));
		cr_assert_eq(ivm_mm_maps_count(maps), MANY);
		for (i = 0; i < MANY; i++) {
			const struct ivm_vma *vm = ivm_mm_maps_get(maps, i);

			cr_assert_eq(vm->start, 0x10000000 + i * 0x3000);
			cr_assert_eq(vm->vma, vmas[i]);
			cr_assert_eq(ivm_vma_is_file(vm), i % 3 == 0);
			if (i % 3 == 0)
				cr_assert_str_eq(vm->path, "/data");
		}
		/* Its VMAs with no room to spare (lists are kept), one path. */
		cr_expect_geq(ivm_mm_maps_memory(maps),
			      MANY * sizeof(struct ivm_vma) + sizeof("/data"));
		cr_expect_lt(ivm_mm_maps_memory(maps),
			     MANY * sizeof(struct ivm_vma) + 1024);
		ivm_mm_maps_destroy(maps);
		/* One address: a descent, hits and gaps. */
		for (i = 0; i < MANY; i += 37) {
			uint64_t s = 0x10000000 + i * 0x3000;

			err = ivm_mm_vma_at(&w.src, w.mm, s + 0x1fff, &v);
			cr_assert_null(err, "%s",
				       err ? ivm_error_string(err) : "");
			cr_expect_eq(v.start, s);
			cr_expect_null(v.path);
			cr_expect_eq(v.file.ino, i % 3 ? 0 : 9);
			cr_expect_eq(v.pgoff, i % 3 ? 0 : i << 12);
			err = ivm_mm_vma_at(&w.src, w.mm, s + 0x2000, &v);
			cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
			ivm_error_destroy(err);
		}
		sw_fini(&w);
	}
}

Test(mm_maps, cap_on_vmas)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b;
	uint64_t vmas[MANY];

	for (b = 0; b < nb; b++) {
		struct ivm_mm_maps *maps;
		struct sworld w;

		sw_init(&w, btfs[b]);
		build_many(&w, vmas);
		sw_maple(&w, vmas, MANY, 4, 3);
		maps = walk(&w, 10);
		cr_expect_eq(ivm_mm_maps_count(maps), 10);
		cr_assert_not_null(ivm_mm_maps_truncated(maps));
		cr_expect(strstr(ivm_error_string(ivm_mm_maps_truncated(maps)),
				 "more than 10 VMAs"));
		ivm_mm_maps_destroy(maps);
		sw_fini(&w);
	}
}

/* ---- broken trees -------------------------------------------------------- */

/* The enode in slot i of the arange node at node. */
static uint64_t *arange_slot(struct sworld *w, uint64_t node, unsigned i)
{
	return (uint64_t *)skm_at(&w->k, node + w->o->ma64_slot + 8 * i, 8);
}

typedef void (*breaker)(struct sworld *w, uint64_t root, uint64_t *vmas);

/*
 * Build MANY VMAs as leaves of 4 under nodes of 3 children, break the
 * tree, walk it: the walk must end, truncated, with the VMAs before the
 * damage intact and in order.  Returns how many were kept.
 */
static size_t walk_broken(struct ivm_btf *btf, breaker brk, const char *why)
{
	struct ivm_mm_maps *maps;
	uint64_t vmas[MANY], root;
	const struct ivm_error *t;
	struct sworld w;
	size_t i, n;

	sw_init(&w, btf);
	build_many(&w, vmas);
	root = sw_maple(&w, vmas, MANY, 4, 3);
	brk(&w, root, vmas);
	maps = walk(&w, 0);
	t = ivm_mm_maps_truncated(maps);
	cr_assert_not_null(t, "walk of a broken tree (%s) not truncated", why);
	cr_expect(strstr(ivm_error_string(t), why), "'%s' lacks '%s'",
		  ivm_error_string(t), why);
	n = ivm_mm_maps_count(maps);
	cr_expect_lt(n, MANY);
	for (i = 0; i < n; i++)
		cr_assert_eq(ivm_mm_maps_get(maps, i)->start,
			     0x10000000 + i * 0x3000);
	ivm_mm_maps_destroy(maps);
	sw_fini(&w);
	return n;
}

static void break_fault(struct sworld *w, uint64_t root, uint64_t *vmas)
{
	/* The rightmost leaf's parent chain: poison a middle child. */
	uint64_t child = *arange_slot(w, root, 1) & ~255ull;

	skm_poison(&w->k, child);
}

static void break_cycle(struct sworld *w, uint64_t root, uint64_t *vmas)
{
	/* A child pointer back to the root itself. */
	uint64_t child = *arange_slot(w, root, 1) & ~255ull;

	*arange_slot(w, child, 0) = sw_enode(root, w->o->maple_arange_64);
}

static void break_type(struct sworld *w, uint64_t root, uint64_t *vmas)
{
	*arange_slot(w, root, 1) = (*arange_slot(w, root, 1) & ~0x78ull) |
				   7 << 3;
}

static void break_dead(struct sworld *w, uint64_t root, uint64_t *vmas)
{
	uint64_t child = *arange_slot(w, root, 1) & ~255ull;

	skm_w64(&w->k, child, child);
}

static void break_range(struct sworld *w, uint64_t root, uint64_t *vmas)
{
	skm_w64(&w->k, vmas[200] + w->o->vma_end, 0x10000000 + 200 * 0x3000 +
		0x3000);
}

static void break_meta(struct sworld *w, uint64_t root, uint64_t *vmas)
{
	skm_w8(&w->k, root + w->o->ma64_meta_end, 200);
}

static void break_pivots(struct sworld *w, uint64_t root, uint64_t *vmas)
{
	/* A pivot below the one before it. */
	skm_w64(&w->k, root + w->o->ma64_pivot + 8, 5);
}

static void break_entry(struct sworld *w, uint64_t root, uint64_t *vmas)
{
	/* A user-space "VMA" pointer in a leaf. */
	uint64_t n = *arange_slot(w, root, 0) & ~255ull;

	while (((*arange_slot(w, n, 0) >> 3) & 15) == w->o->maple_arange_64)
		n = *arange_slot(w, n, 0) & ~255ull;
	n = *arange_slot(w, n, 0) & ~255ull;
	skm_w64(&w->k, n + w->o->mr64_slot + 8 * 1, 0x7f0000001000ull);
}

static void break_order(struct sworld *w, uint64_t root, uint64_t *vmas)
{
	/* Two slots of one leaf holding the same VMA: a repeat. */
	uint64_t n = *arange_slot(w, root, 0) & ~255ull;

	while (((*arange_slot(w, n, 0) >> 3) & 15) == w->o->maple_arange_64)
		n = *arange_slot(w, n, 0) & ~255ull;
	n = *arange_slot(w, n, 0) & ~255ull;
	skm_w64(&w->k, n + w->o->mr64_slot + 8 * 3,
		ivm_le64(skm_at(&w->k, n + w->o->mr64_slot + 8, 8)));
}

Test(mm_maps, broken_trees_truncate)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b;

	for (b = 0; b < nb; b++) {
		cr_expect_gt(walk_broken(btfs[b], break_fault,
					 "synthetic fault"), 0);
		walk_broken(btfs[b], break_cycle, "");
		walk_broken(btfs[b], break_type, "unknown type 7");
		walk_broken(btfs[b], break_dead, "dead");
		cr_expect_eq(walk_broken(btfs[b], break_range, "tree slot"),
			     200);
		walk_broken(btfs[b], break_meta, "data end 200");
		walk_broken(btfs[b], break_pivots, "leaves");
		walk_broken(btfs[b], break_entry, "not a VMA pointer");
		walk_broken(btfs[b], break_order, "");
	}
}

Test(mm_maps, too_deep)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b;

	for (b = 0; b < nb; b++) {
		struct ivm_mm_maps *maps;
		struct sworld w;
		uint64_t vma, child;
		struct sw_entry e[2];
		struct sw_child c;
		int level;

		sw_init(&w, btfs[b]);
		vma = sw_vma(&w, 0x400000, 0x401000, SW_R, 0, 0);
		e[0] = (struct sw_entry){ 0, 0x3fffff, 0 };
		e[1] = (struct sw_entry){ 0x400000, UINT64_MAX, 0 };
		c = sw_node(&w, w.o->maple_leaf_64, e, 2);
		skm_w64(&w.k, c.node + w.o->mr64_slot + 8, vma);
		/* 40 nodes of one child each: deeper than any tree. */
		for (level = 0; level < 40; level++) {
			struct sw_entry pe = { 0, UINT64_MAX, c.enode };

			child = c.node;
			c = sw_node(&w, w.o->maple_arange_64, &pe, 1);
			skm_w64(&w.k, child, c.node | 6);
		}
		skm_w64(&w.k, w.mm + w.o->mm_mt_root, c.enode | 2);
		maps = walk(&w, 0);
		cr_expect_eq(ivm_mm_maps_count(maps), 0);
		cr_assert_not_null(ivm_mm_maps_truncated(maps));
		cr_expect(strstr(ivm_error_string(ivm_mm_maps_truncated(maps)),
				 "deeper"));
		ivm_mm_maps_destroy(maps);
		sw_fini(&w);
	}
}

/*
 * A range tree (not allocation range) whose first child is a dense node
 * (one index a slot) holding an XA_ZERO_ENTRY and nothing else, the
 * second a leaf with two VMAs and a zero entry between them.
 */
Test(mm_maps, dense_range_and_zero_entries)
{
	struct ivm_btf *btfs[2];
	size_t nb = synth_btfs(btfs), b;

	for (b = 0; b < nb; b++) {
		struct ivm_mm_maps *maps;
		struct sworld w;
		uint64_t dense, v1, v2;
		struct sw_entry le[4], re[2];
		struct sw_child leaf, root;
		unsigned int slots;

		sw_init(&w, btfs[b]);
		slots = w.o->dense_nr_slots;
		dense = skm_alloc(&w.k, w.node_size, 256);
		skm_w64(&w.k, dense + w.o->dense_slot + 8 * 3, 0x406);
		v1 = sw_vma(&w, 0x400000, 0x401000, SW_R, 0, 0);
		v2 = sw_vma(&w, 0x500000, 0x502000, SW_R | SW_W, 0, 0);
		le[0] = (struct sw_entry){ slots, 0x3fffff, 0 };
		le[1] = (struct sw_entry){ 0x400000, 0x400fff, v1 };
		le[2] = (struct sw_entry){ 0x401000, 0x4fffff, 0x406 };
		le[3] = (struct sw_entry){ 0x500000, UINT64_MAX, 0 };
		leaf = sw_node(&w, w.o->maple_leaf_64, le, 4);
		/* v2 in place of the last gap, ending where it ends. */
		skm_w64(&w.k, leaf.node + w.o->mr64_pivot + 8 * 3, 0x501fff);
		skm_w64(&w.k, leaf.node + w.o->mr64_slot + 8 * 3, v2);
		skm_w8(&w.k, leaf.node + w.o->mr64_meta_end, 4);
		skm_w64(&w.k, leaf.node + w.o->mr64_pivot + 8 * 4, UINT64_MAX);
		re[0] = (struct sw_entry){ 0, slots - 1,
					   sw_enode(dense, w.o->maple_dense) };
		re[1] = (struct sw_entry){ slots, UINT64_MAX, leaf.enode };
		root = sw_node(&w, w.o->maple_range_64, re, 2);
		skm_w64(&w.k, w.mm + w.o->mm_mt_root, root.enode | 2);
		maps = walk(&w, 0);
		cr_assert_null(ivm_mm_maps_truncated(maps), "%s",
			       ivm_error_string(ivm_mm_maps_truncated(maps)));
		cr_assert_eq(ivm_mm_maps_count(maps), 2);
		cr_expect_eq(ivm_mm_maps_get(maps, 0)->start, 0x400000);
		cr_expect_eq(ivm_mm_maps_get(maps, 1)->end, 0x502000);
		ivm_mm_maps_destroy(maps);
		sw_fini(&w);
	}
}

/* ---- lists ---------------------------------------------------------------- */

Test(mm_maps, list_cycle_and_disorder)
{
	struct ivm_btf *btf = synth_hand_btf(true);
	uint64_t vmas[MANY];
	int round;

	for (round = 0; round < 2; round++) {
		struct ivm_mm_maps *maps;
		struct sworld w;

		sw_init(&w, btf);
		build_many(&w, vmas);
		sw_list(&w, vmas, MANY);
		if (round == 0)	/* the last points back to the 100th */
			skm_w64(&w.k, vmas[MANY - 1] + w.o->vma_next,
				vmas[100]);
		else {		/* 11 before 10 */
			skm_w64(&w.k, vmas[9] + w.o->vma_next, vmas[11]);
			skm_w64(&w.k, vmas[11] + w.o->vma_next, vmas[10]);
		}
		maps = walk(&w, 0);
		cr_assert_not_null(ivm_mm_maps_truncated(maps));
		cr_expect(strstr(ivm_error_string(ivm_mm_maps_truncated(maps)),
				 "not after"));
		cr_expect_eq(ivm_mm_maps_count(maps), round == 0 ? MANY : 11);
		ivm_mm_maps_destroy(maps);
		sw_fini(&w);
	}
	ivm_btf_destroy(btf);
}

/* ---- paths ---------------------------------------------------------------- */

static char *path_of(struct sworld *w, uint64_t dentry,
		     enum ivm_vma_path_state *state)
{
	struct sw_file f = sw_file(w, w->root_mount, dentry, 1, 2, 0);
	struct ivm_error *err;
	char *path = NULL;

	err = ivm_mm_file_path(&w->src, f.file, &path, state);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	return path;
}

Test(mm_maps, path_cycle_ends)
{
	struct sworld w;
	enum ivm_vma_path_state state;
	uint64_t a, b;
	char *path;

	sw_init(&w, synth_hand_btf(false));
	a = sw_dentry(&w, w.root_dentry, "a");
	b = sw_dentry(&w, a, "b");
	skm_w64(&w.k, a + w.o->dentry_parent, b);
	w.k.reads = 0;
	path = path_of(&w, b, &state);
	cr_expect_eq(state, IVM_VMA_PATH_CUT);
	cr_expect(strlen(path) < IVM_MM_MAX_PATH);
	cr_expect(!strcmp(path + strlen(path) - 4, "/a/b"), "%s", path);
	cr_expect_lt(w.k.reads, 4 * IVM_MM_MAX_PATH_DEPTH);
	free(path);
	ivm_btf_destroy(w.btf);
	sw_fini(&w);
}

Test(mm_maps, path_caps_length_and_names)
{
	char name[300];
	struct sworld w;
	enum ivm_vma_path_state state;
	uint64_t d;
	char *path;
	int i;

	sw_init(&w, synth_hand_btf(false));
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	/* A name that claims 4 GiB: read as NAME_MAX bytes. */
	d = sw_dentry(&w, w.root_dentry, name);
	skm_w32(&w.k, d + w.o->dentry_name_len, 0xffffffff);
	path = path_of(&w, d, &state);
	cr_expect_eq(state, IVM_VMA_PATH_FULL);
	cr_expect_eq(strlen(path), 1 + IVM_MM_MAX_NAME - 1);
	free(path);
	/* 40 levels of 200-byte names: over PATH_MAX, the tail kept. */
	name[200] = '\0';
	d = w.root_dentry;
	for (i = 0; i < 40; i++)
		d = sw_dentry(&w, d, name);
	d = sw_dentry(&w, d, "leaf");
	path = path_of(&w, d, &state);
	cr_expect_eq(state, IVM_VMA_PATH_CUT);
	cr_expect_lt(strlen(path), IVM_MM_MAX_PATH);
	cr_expect_gt(strlen(path), IVM_MM_MAX_PATH - 300);
	cr_expect(!strcmp(path + strlen(path) - 5, "/leaf"));
	cr_expect_eq(path[0], '/');
	free(path);
	ivm_btf_destroy(w.btf);
	sw_fini(&w);
}

Test(mm_maps, path_fault_keeps_the_tail)
{
	struct sworld w;
	enum ivm_vma_path_state state;
	uint64_t a, b, c;
	char *path;

	sw_init(&w, synth_hand_btf(false));
	a = sw_dentry(&w, w.root_dentry, "usr");
	b = sw_dentry(&w, a, "lib");
	c = sw_dentry(&w, b, "libc.so.6");
	skm_poison(&w.k, a);
	path = path_of(&w, c, &state);
	cr_expect_eq(state, IVM_VMA_PATH_FAULT);
	cr_expect_str_eq(path, "/lib/libc.so.6");
	free(path);
	/* A NUL inside a name (hostile) does not cut the path short. */
	c = sw_dentry(&w, w.root_dentry, "lib");
	skm_w8(&w.k, ivm_le64(skm_at(&w.k, c + w.o->dentry_name, 8)) + 1, 0);
	path = path_of(&w, sw_dentry(&w, c, "x"), &state);
	cr_expect_eq(state, IVM_VMA_PATH_FULL);
	cr_expect_str_eq(path, "/l?b/x");
	free(path);
	ivm_btf_destroy(w.btf);
	sw_fini(&w);
}

Test(mm_maps, exe_file_without_a_walk)
{
	struct ivm_guest_file gf;
	struct ivm_error *err;
	struct everything e;
	struct sworld w;

	sw_init(&w, synth_hand_btf(false));
	build_everything(&w, &e);
	sw_maple(&w, e.vmas, e.n, 4, 3);
	err = ivm_mm_exe_file(&w.src, w.mm, &gf);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_expect_eq(gf.file, e.exe_file);
	cr_expect_eq(gf.ino, 47);
	cr_expect_eq(gf.size, 0x5000);
	skm_w64(&w.k, w.mm + w.o->mm_exe_file, 0);
	err = ivm_mm_exe_file(&w.src, w.mm, &gf);
	cr_expect(err && err->code == IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_btf_destroy(w.btf);
	sw_fini(&w);
}
