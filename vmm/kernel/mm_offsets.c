// SPDX-License-Identifier: MIT
/*
 * Where the fields of mm_struct, vm_area_struct, the maple tree's nodes,
 * struct file, dentry, inode and their kin are in the guest's kernel, from
 * its BTF (mm_maps.h ivm_mm_offsets_from_btf), and the source of a walk.
 */
#include <stddef.h>
#include <string.h>

#include "kernel/mm_int.h"
#include "kernel/mm_maps.h"

/* ---- offsets ----------------------------------------------------------- */

#define FIELD(type, path, want, field, optional)                              \
	{ type, path, want, offsetof(struct ivm_mm_offsets, field), optional }

static struct ivm_error *enum_u32(const struct ivm_btf *btf, const char *name,
				  uint32_t *ret)
{
	int64_t v;
	struct ivm_error *err = ivm_btf_enum_value(btf, "maple_type", name,
						   &v);

	if (err)
		return err;
	if (v < 0 || (uint64_t)v > MAPLE_NODE_TYPE_MASK)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"enum maple_type: %s = %lld",
					name, (long long)v);
	*ret = (uint32_t)v;
	return NULL;
}

/* A node's pivot and slot arrays: slots one more than pivots. */
static struct ivm_error *node_arrays(const struct ivm_btf *btf,
				     const char *type, uint32_t node_size,
				     uint32_t *pivot, uint32_t *slot,
				     uint32_t *nr_slots)
{
	uint32_t psize, ssize;
	struct ivm_error *err;

	err = ivm_btf_offset(btf, type, "pivot", 0, pivot, &psize);
	if (!err)
		err = ivm_btf_offset(btf, type, "slot", 0, slot, &ssize);
	if (err)
		return err;
	if (psize % 8 || ssize % 8 || ssize / 8 != psize / 8 + 1 ||
	    ssize / 8 < 2 || ssize / 8 > MAX_SLOTS ||
	    *pivot + psize > node_size || *slot + ssize > node_size)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"struct %s: %u bytes of pivots and %u of slots in a %u-byte node",
					type, psize, ssize, node_size);
	*nr_slots = ssize / 8;
	return NULL;
}

static struct ivm_error *maple_offsets(const struct ivm_btf *btf,
				       struct ivm_mm_offsets *ret)
{
	struct ivm_mm_offsets o = *ret;
	struct ivm_error *err;
	uint32_t size;

	err = ivm_btf_struct_size(btf, "maple_node", &o.maple_node_size);
	if (err)
		return err;
	if (o.maple_node_size > MAPLE_NODE_MASK + 1)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"struct maple_node: %u bytes, more than its alignment",
					o.maple_node_size);
	err = node_arrays(btf, "maple_range_64", o.maple_node_size,
			  &o.mr64_pivot, &o.mr64_slot, &o.mr64_nr_slots);
	if (!err)
		err = node_arrays(btf, "maple_arange_64", o.maple_node_size,
				  &o.ma64_pivot, &o.ma64_slot,
				  &o.ma64_nr_slots);
	if (err)
		return err;
	err = ivm_btf_offset_opt(btf, "maple_range_64", "meta.end", 1,
				 &o.mr64_meta_end, NULL);
	if (!err)
		err = ivm_btf_offset_opt(btf, "maple_arange_64", "meta.end", 1,
					 &o.ma64_meta_end, NULL);
	if (!err)
		err = ivm_btf_offset(btf, "maple_node", "slot", 0,
				     &o.dense_slot, &size);
	if (err)
		return err;
	if (size % 8 || size / 8 < 1 || size / 8 > MAX_SLOTS ||
	    o.dense_slot + size > o.maple_node_size)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"struct maple_node: %u bytes of slots",
					size);
	o.dense_nr_slots = size / 8;
	err = enum_u32(btf, "maple_dense", &o.maple_dense);
	if (!err)
		err = enum_u32(btf, "maple_leaf_64", &o.maple_leaf_64);
	if (!err)
		err = enum_u32(btf, "maple_range_64", &o.maple_range_64);
	if (!err)
		err = enum_u32(btf, "maple_arange_64", &o.maple_arange_64);
	if (err)
		return err;
	*ret = o;
	return NULL;
}

/* What every layout has, or may have. */
static const struct ivm_btf_field_spec common_fields[] = {
	FIELD("mm_struct", "exe_file", 8, mm_exe_file, true),
	FIELD("mm_struct", "start_brk", 8, mm_start_brk, true),
	FIELD("mm_struct", "brk", 8, mm_brk, true),
	FIELD("mm_struct", "start_stack", 8, mm_start_stack, true),
	FIELD("mm_struct", "map_count", 4, mm_map_count, true),
	FIELD("vm_area_struct", "vm_start", 8, vma_start, false),
	FIELD("vm_area_struct", "vm_end", 8, vma_end, false),
	/* 6.3 put it in a union with __vm_flags; the name still finds it. */
	FIELD("vm_area_struct", "vm_flags", 8, vma_flags, false),
	FIELD("vm_area_struct", "vm_pgoff", 8, vma_pgoff, false),
	FIELD("vm_area_struct", "vm_file", 8, vma_file, false),
	FIELD("vm_area_struct", "anon_vma", 8, vma_anon_vma, true),
	FIELD("vm_area_struct", "vm_ops", 8, vma_ops, true),
	FIELD("vm_area_struct", "vm_private_data", 8, vma_private_data, true),
	FIELD("vm_area_struct", "anon_name", 8, vma_anon_name, true),
	FIELD("anon_vma_name", "name", 0, anon_vma_name_name, true),
	FIELD("vm_special_mapping", "name", 8, special_mapping_name, true),
	FIELD("file", "f_path.mnt", 8, file_mnt, false),
	FIELD("file", "f_path.dentry", 8, file_dentry, false),
	FIELD("file", "f_inode", 8, file_inode, false),
	FIELD("dentry", "d_parent", 8, dentry_parent, false),
	FIELD("dentry", "d_name.len", 4, dentry_name_len, false),
	FIELD("dentry", "d_name.name", 8, dentry_name, false),
	FIELD("dentry", "d_hash.pprev", 8, dentry_hash_pprev, false),
	FIELD("dentry", "d_op", 8, dentry_op, false),
	FIELD("dentry_operations", "d_dname", 8, dentry_op_dname, false),
	FIELD("inode", "i_ino", 8, inode_ino, false),
	FIELD("inode", "i_sb", 8, inode_sb, false),
	FIELD("inode", "i_mapping", 8, inode_mapping, false),
	FIELD("inode", "i_size", 8, inode_size, false),
	FIELD("inode", "i_generation", 4, inode_generation, true),
	FIELD("super_block", "s_dev", 4, sb_dev, false),
	FIELD("vfsmount", "mnt_root", 8, vfsmount_root, false),
	FIELD("mount", "mnt", 0, mount_mnt, false),
	FIELD("mount", "mnt_parent", 8, mount_parent, false),
	FIELD("mount", "mnt_mountpoint", 8, mount_mountpoint, false),
};

/* Members that are all there, or all taken as absent. */
static void all_or_none(uint32_t *const *f, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (*f[i] == IVM_KOFF_NONE)
			break;
	if (i < n)
		for (i = 0; i < n; i++)
			*f[i] = IVM_KOFF_NONE;
}

struct ivm_error *ivm_mm_offsets_from_btf(const struct ivm_btf *btf,
					  struct ivm_mm_offsets *ret)
{
	struct ivm_mm_offsets o;
	struct ivm_error *err;

	memset(&o, 0xff, sizeof(o));	/* every field IVM_KOFF_NONE */
	err = ivm_btf_offset_opt(btf, "mm_struct", "mm_mt.ma_root", 8,
				 &o.mm_mt_root, NULL);
	if (!err && o.mm_mt_root == IVM_KOFF_NONE) {
		err = ivm_btf_offset(btf, "mm_struct", "mmap", 8, &o.mm_mmap,
				     NULL);
		if (err)
			return ivm_error_wrap(err,
					      "mm_struct has neither a maple tree (mm_mt) nor a VMA list");
		err = ivm_btf_offset(btf, "vm_area_struct", "vm_next", 8,
				     &o.vma_next, NULL);
	} else if (!err) {
		err = maple_offsets(btf, &o);
	}
	if (!err)
		err = ivm_btf_struct_size(btf, "vm_area_struct", &o.vma_size);
	if (!err)
		err = ivm_btf_offsets_find(btf, common_fields,
					   sizeof(common_fields) /
					   sizeof(common_fields[0]), &o);
	if (err)
		return err;
	all_or_none((uint32_t *const[]){ &o.mm_start_brk, &o.mm_brk,
					 &o.mm_start_stack }, 3);
	all_or_none((uint32_t *const[]){ &o.vma_ops, &o.vma_private_data,
					 &o.special_mapping_name }, 3);
	all_or_none((uint32_t *const[]){ &o.vma_anon_name,
					 &o.anon_vma_name_name }, 2);
	*ret = o;
	return NULL;
}

struct ivm_error *ivm_mm_source_init(struct ivm_mm_source *src,
				     const struct ivm_kernel_layout *layout,
				     const struct ivm_btf *btf)
{
	struct ivm_error *err;

	memset(src, 0, sizeof(*src));
	err = ivm_mm_offsets_from_btf(btf, &src->off);
	if (err)
		return err;
	ivm_kernel_layout_reader(layout, &src->kmem);
	src->la57 = ivm_kernel_layout_la57(layout);
	/* Static symbols: in a vmlinux, in kallsyms only with ALL. */
	err = ivm_kernel_symbol(layout, "special_mapping_vmops",
				&src->special_vmops);
	if (err) {
		ivm_error_destroy(err);
		src->special_vmops = 0;
	}
	err = ivm_kernel_symbol(layout, "anon_inodefs_dname",
				&src->anon_inode_dname);
	if (err) {
		ivm_error_destroy(err);
		src->anon_inode_dname = 0;
	}
	return NULL;
}

