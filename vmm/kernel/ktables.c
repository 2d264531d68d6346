// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernel/ktables.h"

struct ivm_ktables {
	struct ivm_ktables *next;
	char *path;
	struct stat st;			/* which file: dev, ino, size, mtime */
	unsigned int users;
	struct ivm_btf *btf;
	struct ivm_ksyms *ksyms;
	struct ivm_orc_table *orc;	/* NULL until asked for */
};

/* Every loaded file's tables; a few kernels at most. */
static struct ivm_ktables *loaded;

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static void free_tables(struct ivm_ktables *kt)
{
	ivm_orc_destroy(kt->orc);
	ivm_ksyms_destroy(kt->ksyms);
	ivm_btf_destroy(kt->btf);
	free(kt->path);
	free(kt);
}

struct ivm_error *ivm_ktables_get(const char *path, struct ivm_ktables **ret)
{
	struct ivm_ktables *kt;
	struct ivm_error *err;
	struct stat st;

	if (stat(path, &st))
		return ivm_error_os(errno, "%s", path);
	for (kt = loaded; kt; kt = kt->next) {
		if (same_file(&kt->st, &st)) {
			kt->users++;
			*ret = kt;
			return NULL;
		}
	}
	kt = calloc(1, sizeof(*kt));
	if (!kt)
		return &ivm_enomem;
	kt->st = st;
	kt->path = strdup(path);
	if (!kt->path) {
		free(kt);
		return &ivm_enomem;
	}
	err = ivm_btf_load_file(path, &kt->btf);
	if (!err)
		err = ivm_ksyms_load_elf(path, &kt->ksyms);
	if (err) {
		free_tables(kt);
		return ivm_error_wrap(err, "%s", path);
	}
	kt->users = 1;
	kt->next = loaded;
	loaded = kt;
	*ret = kt;
	return NULL;
}

void ivm_ktables_put(struct ivm_ktables *kt)
{
	struct ivm_ktables **pp;

	if (!kt || --kt->users)
		return;
	for (pp = &loaded; *pp; pp = &(*pp)->next) {
		if (*pp == kt) {
			*pp = kt->next;
			break;
		}
	}
	free_tables(kt);
}

struct ivm_btf *ivm_ktables_btf(const struct ivm_ktables *kt)
{
	return kt->btf;
}

struct ivm_ksyms *ivm_ktables_ksyms(const struct ivm_ktables *kt)
{
	return kt->ksyms;
}

struct ivm_error *ivm_ktables_orc(struct ivm_ktables *kt,
				  const struct ivm_orc_table **ret)
{
	struct ivm_error *err;

	if (!kt->orc) {
		err = ivm_orc_load_elf(kt->path, IVM_ORC_FORMAT_AUTO, &kt->orc);
		if (err)
			return err;
	}
	*ret = kt->orc;
	return NULL;
}

unsigned int ivm_ktables_users(const struct ivm_ktables *kt)
{
	return kt->users;
}
