// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile/window_dir.h"

struct ivm_window_dir {
	char *dir;
	char name[IVM_WINDOW_NAME_MAX + 1];
	uint64_t keep_windows, keep_bytes;
	char *path;		/* the last ivm_window_dir_next() answer */
};

static const char *const suffixes[] = { ".prof", ".pb.gz" };
#define NR_SUFFIXES (sizeof(suffixes) / sizeof(suffixes[0]))

struct ivm_error *ivm_window_dir_create(const struct ivm_window_dir_config *cfg,
					struct ivm_window_dir **ret)
{
	struct ivm_window_dir *d;
	struct stat st;
	size_t i;

	if (mkdir(cfg->dir, 0755) < 0 && errno != EEXIST)
		return ivm_error_os(errno, "creating %s", cfg->dir);
	if (stat(cfg->dir, &st) < 0)
		return ivm_error_os(errno, "%s", cfg->dir);
	if (!S_ISDIR(st.st_mode))
		return ivm_error_os(ENOTDIR, "%s", cfg->dir);
	d = calloc(1, sizeof(*d));
	if (!d || !(d->dir = strdup(cfg->dir))) {
		free(d);
		return &ivm_enomem;
	}
	/* A file name of the guest's name, whatever it holds. */
	for (i = 0; cfg->name[i] && i < IVM_WINDOW_NAME_MAX; i++) {
		char c = cfg->name[i];

		d->name[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9') || c == '.' || c == '_' ||
			     c == '-' ? c : '_';
	}
	if (!i)
		strcpy(d->name, "guest");
	if (d->name[0] == '.')	/* no hidden files */
		d->name[0] = '_';
	d->keep_windows = cfg->keep_windows;
	d->keep_bytes = cfg->keep_bytes;
	*ret = d;
	return NULL;
}

void ivm_window_dir_destroy(struct ivm_window_dir *d)
{
	if (!d)
		return;
	free(d->path);
	free(d->dir);
	free(d);
}

/* Whether a window of this name has stem (either of its files exists). */
static bool stem_taken(const struct ivm_window_dir *d, const char *stem)
{
	char path[4096];
	size_t k;

	for (k = 0; k < NR_SUFFIXES; k++) {
		snprintf(path, sizeof(path), "%s/%s%s", d->dir, stem,
			 suffixes[k]);
		if (!access(path, F_OK))
			return true;
	}
	return false;
}

struct ivm_error *ivm_window_dir_next(struct ivm_window_dir *d, time_t start,
				      const char **ret)
{
	char stem[IVM_WINDOW_STEM_MAX], when[20];
	struct tm tm;
	int n;

	if (!gmtime_r(&start, &tm))
		return ivm_error_create(IVM_ERROR_INVALID, "bad window start");
	strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(stem, sizeof(stem), "%s-%s", d->name, when);
	/*
	 * Limit iterations: a restart in the same second takes -1, -2...
	 * The stem has room for all of them (IVM_WINDOW_STEM_MAX); should
	 * it not, a cut name must not pass for a free one.
	 */
	for (n = 1; stem_taken(d, stem) && n < 1000; n++)
		if (snprintf(stem, sizeof(stem), "%s-%s-%d", d->name, when,
			     n) >= (int)sizeof(stem))
			return ivm_error_create(IVM_ERROR_INVALID,
						"%s: window name %s too long",
						d->dir, stem);
	if (n == 1000)
		return ivm_error_create(IVM_ERROR_INVALID,
					"%s: too many windows starting at %s",
					d->dir, when);
	free(d->path);
	if (asprintf(&d->path, "%s/%s.prof", d->dir, stem) < 0) {
		d->path = NULL;
		return &ivm_enomem;
	}
	*ret = d->path;
	return NULL;
}

char *ivm_window_dir_pprof_path(const char *prof_path)
{
	size_t n = strlen(prof_path);
	char *p;

	if (n > 5 && !strcmp(prof_path + n - 5, ".prof"))
		n -= 5;
	if (asprintf(&p, "%.*s.pb.gz", (int)n, prof_path) < 0)
		return NULL;
	return p;
}

/*
 * The stem of a window file of this name ("NAME-YYYYmmddTHHMMSSZ" and an
 * optional "-N"), or 0 when file is not one: its length.
 */
static size_t window_stem(const struct ivm_window_dir *d, const char *file)
{
	size_t n = strlen(d->name), k, i;

	if (strncmp(file, d->name, n) || file[n] != '-')
		return 0;
	i = n + 1;
	/* YYYYmmddTHHMMSSZ */
	for (k = 0; k < 16; k++, i++) {
		char c = file[i];
		bool ok = k == 8 ? c == 'T' : k == 15 ? c == 'Z' :
			  c >= '0' && c <= '9';

		if (!ok)
			return 0;
	}
	if (file[i] == '-') {
		size_t digits = 0;

		for (i++; file[i] >= '0' && file[i] <= '9'; i++)
			digits++;
		if (!digits)
			return 0;
	}
	for (k = 0; k < NR_SUFFIXES; k++)
		if (!strcmp(file + i, suffixes[k]))
			return i;
	return 0;
}

struct window {
	char stem[IVM_WINDOW_STEM_MAX];
	uint64_t bytes;
};

static int window_cmp(const void *a, const void *b)
{
	return strcmp(((const struct window *)a)->stem,
		      ((const struct window *)b)->stem);
}

/* The windows of this name in the directory, oldest first; caller frees. */
static struct window *list_windows(const struct ivm_window_dir *d, size_t *nr)
{
	struct window *w = NULL, *nw;
	size_t cap = 0, n = 0, i, len;
	struct dirent *e;
	DIR *dir;

	*nr = 0;
	dir = opendir(d->dir);
	if (!dir)
		return NULL;
	while ((e = readdir(dir))) {
		char path[4096];
		struct stat st;

		len = window_stem(d, e->d_name);
		if (!len || len >= IVM_WINDOW_STEM_MAX)
			continue;
		snprintf(path, sizeof(path), "%s/%s", d->dir, e->d_name);
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		for (i = 0; i < n; i++)
			if (!strncmp(w[i].stem, e->d_name, len) &&
			    !w[i].stem[len])
				break;
		if (i == n) {
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				nw = realloc(w, cap * sizeof(*w));
				if (!nw)
					break;
				w = nw;
			}
			memcpy(w[n].stem, e->d_name, len);
			w[n].stem[len] = '\0';
			w[n].bytes = 0;
			n++;
		}
		w[i].bytes += (uint64_t)st.st_size;
	}
	closedir(dir);
	qsort(w, n, sizeof(*w), window_cmp);
	*nr = n;
	return w;
}

size_t ivm_window_dir_prune(struct ivm_window_dir *d)
{
	struct window *w;
	uint64_t bytes = 0;
	size_t n, i, removed = 0, k;

	if (!d->keep_windows && !d->keep_bytes)
		return 0;
	w = list_windows(d, &n);
	for (i = 0; i < n; i++)
		bytes += w[i].bytes;
	/* Oldest first; the newest stays, whatever its size. */
	for (i = 0; i + 1 < n; i++) {
		bool over = (d->keep_windows && n - i > d->keep_windows) ||
			    (d->keep_bytes && bytes > d->keep_bytes);

		if (!over)
			break;
		for (k = 0; k < NR_SUFFIXES; k++) {
			char path[4096];

			snprintf(path, sizeof(path), "%s/%s%s", d->dir,
				 w[i].stem, suffixes[k]);
			unlink(path);
		}
		bytes -= w[i].bytes;
		removed++;
	}
	free(w);
	return removed;
}
