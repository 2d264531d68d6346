// SPDX-License-Identifier: MIT
/*
 * The guest's kernel memory as the walks of a process's mappings read it
 * (bounded strings, pointers checked to be the kernel's), and the files
 * they map: a struct file's identity (inode, device) and its path, rebuilt
 * from the dentry chain as d_path() would (mm_int.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "kernel/mm_int.h"
#include "kernel/mm_maps.h"

/* ---- reading ------------------------------------------------------------ */

bool mm_kernel_ptr(const struct ivm_mm_source *src, uint64_t va)
{
	return ivm_kmem_is_kernel_address(va, src->la57);
}

struct ivm_error *mm_kread(const struct ivm_mm_source *src, uint64_t va,
			   void *buf, size_t len)
{
	return ivm_kmem_read_kernel(&src->kmem, src->la57, va, buf, len);
}

struct ivm_error *mm_kread_u64(const struct ivm_mm_source *src,
			       uint64_t va, uint64_t *ret)
{
	uint8_t b[8];
	struct ivm_error *err = mm_kread(src, va, b, sizeof(b));

	if (!err)
		*ret = ivm_le64(b);
	return err;
}

/* A kernel pointer (or 0 when zero_ok) at va, named what in errors. */
struct ivm_error *mm_kread_ptr(const struct ivm_mm_source *src,
			       uint64_t va, const char *what, bool zero_ok,
			       uint64_t *ret)
{
	struct ivm_error *err = mm_kread_u64(src, va, ret);

	if (err)
		return ivm_error_wrap(err, "reading %s", what);
	if ((*ret || !zero_ok) && !mm_kernel_ptr(src, *ret))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s at 0x%llx is 0x%llx, not a kernel address",
					what, (unsigned long long)va,
					(unsigned long long)*ret);
	return NULL;
}

/*
 * Up to cap - 1 bytes of the NUL-terminated string at va into buf, read
 * 32 bytes at a time, never across a page: the names read this way are
 * short, and the end of their object may end what is mapped.
 */
struct ivm_error *mm_kread_str(const struct ivm_mm_source *src,
			       uint64_t va, char *buf, size_t cap)
{
	size_t got = 0;

	while (got + 1 < cap) {
		size_t n = 4096 - ((va + got) & PAGE_MASK_4K);
		struct ivm_error *err;
		char *nul;

		if (n > 32)
			n = 32;
		if (n > cap - 1 - got)
			n = cap - 1 - got;
		err = mm_kread(src, va + got, buf + got, n);
		if (err)
			return err;
		nul = memchr(buf + got, '\0', n);
		got += n;
		if (nul)
			return NULL;
	}
	buf[got] = '\0';
	return NULL;
}

/* ---- paths -------------------------------------------------------------- */

/* A path built backwards from the end of buf. */
struct path_buf {
	char buf[IVM_MM_MAX_PATH];
	size_t pos;			/* first byte used */
	bool cut;
};

static bool path_prepend(struct path_buf *p, const char *s, size_t len)
{
	if (len > p->pos) {
		p->cut = true;
		return false;
	}
	p->pos -= len;
	memcpy(p->buf + p->pos, s, len);
	return true;
}

/* "/name" in front, whole or not at all. */
static bool path_prepend_component(struct path_buf *p, const char *name,
				   size_t len)
{
	if (len + 1 > p->pos) {
		p->cut = true;
		return false;
	}
	path_prepend(p, name, len);
	return path_prepend(p, "/", 1);
}

/* One dentry's name, bounded; NUL bytes (hostile) become '?'. */
static struct ivm_error *dentry_name(const struct ivm_mm_source *src,
				     const uint8_t *d, char *name,
				     size_t *len)
{
	const struct ivm_mm_offsets *o = &src->off;
	uint64_t ptr = ivm_le64(d + o->dentry_name);
	size_t n = ivm_le32(d + o->dentry_name_len), i;
	struct ivm_error *err;

	if (n > IVM_MM_MAX_NAME - 1)
		n = IVM_MM_MAX_NAME - 1;
	err = mm_kread(src, ptr, name, n);
	if (err)
		return err;
	for (i = 0; i < n; i++)
		if (name[i] == '\0')
			name[i] = '?';
	*len = n;
	return NULL;
}

/*
 * A file whose dentry is on no directory (its own parent, and not the
 * root of its mount): d_path() asks the dentry's d_dname, which is
 * simple_dname ("/NAME (deleted)": memfds, SysV shm, shared anonymous
 * memory) or anon_inodefs_dname ("anon_inode:NAME") for what can be
 * mapped; without a d_dname the path is "/".
 */
static struct ivm_error *pseudo_name(const struct ivm_mm_source *src,
				     const uint8_t *d, struct path_buf *p,
				     enum ivm_vma_path_state *state)
{
	const struct ivm_mm_offsets *o = &src->off;
	static const char deleted[] = " (deleted)";
	char name[IVM_MM_MAX_NAME];
	uint64_t op = ivm_le64(d + o->dentry_op), dname = 0;
	struct ivm_error *err = NULL;
	size_t len;

	if (op)
		err = mm_kread_u64(src, op + o->dentry_op_dname, &dname);
	if (!err && dname)
		err = dentry_name(src, d, name, &len);
	if (err) {
		*state = IVM_VMA_PATH_FAULT;
		ivm_error_destroy(err);
		path_prepend(p, "?", 1);
		return NULL;
	}
	if (!dname) {
		path_prepend(p, "/", 1);
	} else if (src->anon_inode_dname && dname == src->anon_inode_dname) {
		path_prepend(p, name, len);
		path_prepend(p, "anon_inode:", 11);
	} else {
		path_prepend(p, deleted, sizeof(deleted) - 1);
		path_prepend(p, name, len);
		path_prepend(p, "/", 1);
	}
	if (p->cut)
		*state = IVM_VMA_PATH_CUT;
	return NULL;
}

/*
 * The d_path() of (mnt, dentry): names up to each mount's root, then the
 * mountpoint in the parent mount, until a mount is its own parent (the
 * root of the tree, or an internal mount such as shmem's for memfds).
 */
static struct ivm_error *build_path(const struct ivm_mm_source *src,
				    uint64_t vfsmnt, uint64_t dentry,
				    struct path_buf *p,
				    enum ivm_vma_path_state *state)
{
	const struct ivm_mm_offsets *o = &src->off;
	uint32_t dlen = o->dentry_parent + 8, mlen;
	uint8_t d[512], m[512];
	char name[IVM_MM_MAX_NAME];
	uint64_t mount, mnt_root = 0, leaf = dentry;
	struct ivm_error *err = NULL;
	bool unlinked = false;
	unsigned int depth;

	/* The dentry fields read, as one span. */
	if (o->dentry_name_len + 4 > dlen)
		dlen = o->dentry_name_len + 4;
	if (o->dentry_name + 8 > dlen)
		dlen = o->dentry_name + 8;
	if (o->dentry_hash_pprev + 8 > dlen)
		dlen = o->dentry_hash_pprev + 8;
	if (o->dentry_op + 8 > dlen)
		dlen = o->dentry_op + 8;
	mlen = o->mount_parent + 8;
	if (o->mount_mountpoint + 8 > mlen)
		mlen = o->mount_mountpoint + 8;
	if (dlen > sizeof(d) || mlen > sizeof(m) ||
	    o->mount_mnt > vfsmnt)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"dentry or mount layout too large to read");
	mount = vfsmnt - o->mount_mnt;
	p->pos = sizeof(p->buf) - 1;
	p->buf[p->pos] = '\0';
	p->cut = false;
	*state = IVM_VMA_PATH_FULL;
	for (depth = 0; depth < IVM_MM_MAX_PATH_DEPTH; depth++) {
		uint64_t parent;
		size_t len;

		if (!mnt_root) {
			err = mm_kread_ptr(src, vfsmnt + o->vfsmount_root,
					   "vfsmount.mnt_root", false, &mnt_root);
			if (err)
				break;
		}
		if (dentry == mnt_root) {
			uint64_t mparent, mountpoint;

			err = mm_kread(src, mount, m, mlen);
			if (err)
				break;
			mparent = ivm_le64(m + o->mount_parent);
			mountpoint = ivm_le64(m + o->mount_mountpoint);
			if (mparent == mount)
				goto done;
			if (!mm_kernel_ptr(src, mparent) ||
			    !mm_kernel_ptr(src, mountpoint) ||
			    mparent + o->mount_mnt < mparent) {
				err = ivm_error_create(IVM_ERROR_PROTOCOL,
						       "mount 0x%llx: bad parent 0x%llx or mountpoint 0x%llx",
						       (unsigned long long)mount,
						       (unsigned long long)mparent,
						       (unsigned long long)mountpoint);
				break;
			}
			mount = mparent;
			vfsmnt = mparent + o->mount_mnt;
			mnt_root = 0;
			dentry = mountpoint;
			continue;
		}
		err = mm_kread(src, dentry, d, dlen);
		if (err)
			break;
		parent = ivm_le64(d + o->dentry_parent);
		if (dentry == leaf && parent == dentry)
			return pseudo_name(src, d, p, state);
		if (dentry == leaf)
			/* d_unlinked(): unhashed and not a root. */
			unlinked = !ivm_le64(d + o->dentry_hash_pprev);
		if (parent == dentry)
			goto done;	/* a filesystem root, not mounted */
		err = dentry_name(src, d, name, &len);
		if (err)
			break;
		if (!path_prepend_component(p, name, len))
			break;
		if (!mm_kernel_ptr(src, parent)) {
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "dentry 0x%llx: parent 0x%llx is not a kernel address",
					       (unsigned long long)dentry,
					       (unsigned long long)parent);
			break;
		}
		dentry = parent;
	}
	if (err) {
		*state = IVM_VMA_PATH_FAULT;
		ivm_error_destroy(err);
	} else {
		*state = IVM_VMA_PATH_CUT;
	}
done:
	if (p->pos == sizeof(p->buf) - 1)
		path_prepend(p, "/", 1);
	if (p->cut && *state == IVM_VMA_PATH_FULL)
		*state = IVM_VMA_PATH_CUT;
	if (unlinked && *state == IVM_VMA_PATH_FULL) {
		static const char deleted[] = " (deleted)";
		size_t len = sizeof(p->buf) - 1 - p->pos;

		/* Appended: move the path down to make room. */
		if (p->pos >= sizeof(deleted) - 1) {
			memmove(p->buf + p->pos - (sizeof(deleted) - 1),
				p->buf + p->pos, len);
			p->pos -= sizeof(deleted) - 1;
			memcpy(p->buf + p->pos + len, deleted,
			       sizeof(deleted));
		}
	}
	return NULL;
}

/* ---- files -------------------------------------------------------------- */

struct ivm_error *mm_read_file_fields(const struct ivm_mm_source *src,
				      uint64_t file, struct file_fields *ret)
{
	const struct ivm_mm_offsets *o = &src->off;
	const struct ivm_kernel_field f[] = {
		{ o->file_mnt, 8 }, { o->file_dentry, 8 }, { o->file_inode, 8 },
	};
	uint8_t b[256];
	uint32_t lo, hi;
	struct ivm_error *err;

	ivm_kernel_fields_span(f, 3, &lo, &hi);
	if (hi - lo > sizeof(b))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"struct file: %u bytes to read",
					hi - lo);
	err = mm_kread(src, file + lo, b, hi - lo);
	if (err)
		return ivm_error_wrap(err, "reading file 0x%llx",
				      (unsigned long long)file);
	ret->mnt = ivm_le64(b + o->file_mnt - lo);
	ret->dentry = ivm_le64(b + o->file_dentry - lo);
	ret->inode = ivm_le64(b + o->file_inode - lo);
	if (!mm_kernel_ptr(src, ret->mnt) || !mm_kernel_ptr(src, ret->dentry) ||
	    !mm_kernel_ptr(src, ret->inode))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"file 0x%llx: mount 0x%llx, dentry 0x%llx or inode 0x%llx is not a kernel address",
					(unsigned long long)file,
					(unsigned long long)ret->mnt,
					(unsigned long long)ret->dentry,
					(unsigned long long)ret->inode);
	return NULL;
}

/* The inode's identity: one read of its fields, one of its device. */
struct ivm_error *mm_read_guest_file(const struct ivm_mm_source *src,
				     uint64_t file, uint64_t inode,
				     struct ivm_guest_file *ret)
{
	const struct ivm_mm_offsets *o = &src->off;
	const struct ivm_kernel_field f[] = {
		{ o->inode_sb, 8 }, { o->inode_mapping, 8 },
		{ o->inode_ino, 8 }, { o->inode_size, 8 },
		{ o->inode_generation, 4 },
	};
	uint8_t b[2048], dev[4];
	struct ivm_error *err;
	uint64_t sb, size;
	uint32_t lo, hi;

	memset(ret, 0, sizeof(*ret));
	ivm_kernel_fields_span(f, sizeof(f) / sizeof(f[0]), &lo, &hi);
	if (hi - lo > sizeof(b))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"struct inode: %u bytes to read",
					hi - lo);
	err = mm_kread(src, inode + lo, b, hi - lo);
	if (err)
		return ivm_error_wrap(err, "reading inode 0x%llx of file 0x%llx",
				      (unsigned long long)inode,
				      (unsigned long long)file);
	sb = ivm_le64(b + o->inode_sb - lo);
	ret->mapping = ivm_le64(b + o->inode_mapping - lo);
	ret->ino = ivm_le64(b + o->inode_ino - lo);
	size = ivm_le64(b + o->inode_size - lo);
	/* i_size is a loff_t: a negative one is no size at all. */
	ret->size = (int64_t)size < 0 ? 0 : size;
	if (o->inode_generation != IVM_KOFF_NONE)
		ret->generation = ivm_le32(b + o->inode_generation - lo);
	if (ret->mapping && !mm_kernel_ptr(src, ret->mapping))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"inode 0x%llx: i_mapping 0x%llx is not a kernel address",
					(unsigned long long)inode,
					(unsigned long long)ret->mapping);
	err = mm_kread(src, sb + o->sb_dev, dev, sizeof(dev));
	if (err)
		return ivm_error_wrap(err, "reading the superblock of inode 0x%llx",
				      (unsigned long long)inode);
	ret->dev = ivm_le32(dev);
	ret->file = file;
	ret->inode = inode;
	return NULL;
}

struct ivm_error *mm_file_path(const struct ivm_mm_source *src,
			       const struct file_fields *ff, char **ret,
			       enum ivm_vma_path_state *state)
{
	struct path_buf *p = malloc(sizeof(*p));
	struct ivm_error *err;

	if (!p)
		return &ivm_enomem;
	err = build_path(src, ff->mnt, ff->dentry, p, state);
	*ret = err ? NULL : strdup(p->buf + p->pos);
	free(p);
	if (err)
		return err;
	return *ret ? NULL : &ivm_enomem;
}

struct ivm_error *ivm_mm_file_path(const struct ivm_mm_source *src,
				   uint64_t file, char **ret,
				   enum ivm_vma_path_state *state)
{
	struct file_fields ff;
	struct ivm_error *err;

	if (!mm_kernel_ptr(src, file))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"file 0x%llx is not a kernel address",
					(unsigned long long)file);
	err = mm_read_file_fields(src, file, &ff);
	if (err)
		return err;
	return mm_file_path(src, &ff, ret, state);
}

/* The identity of the struct file at file. */
struct ivm_error *mm_guest_file_of(const struct ivm_mm_source *src,
				   uint64_t file,
				   struct ivm_guest_file *ret)
{
	struct file_fields ff;
	struct ivm_error *err = mm_read_file_fields(src, file, &ff);

	if (err)
		return err;
	return mm_read_guest_file(src, file, ff.inode, ret);
}

