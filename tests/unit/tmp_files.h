/* SPDX-License-Identifier: MIT */
/*
 * Temporary files and directories of the unit tests, made from a static
 * "/tmp/...-XXXXXX" template with mkstemp()/mkdtemp() and removed by a
 * Criterion fini, which also runs after a failed assertion (a skipped
 * test's does not).  The template tells whether the test got as far as
 * making it: both calls replace all six X's.  Looking at one X only
 * kept a made directory one run in 62.
 */
#ifndef IVM_TEST_TMP_FILES_H
#define IVM_TEST_TMP_FILES_H
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline bool ivm_tmp_made_(const char *tmpl, size_t size)
{
	return size >= 7 && strcmp(tmpl + size - 7, "XXXXXX") != 0;
}

/* tmpl: the static char array itself (its size finds the X's). */
#define IVM_TMP_MADE(tmpl) ivm_tmp_made_((tmpl), sizeof(tmpl))

static inline void ivm_tmp_remove_tree_(const char *dir, size_t size)
{
	char cmd[256];

	if (!ivm_tmp_made_(dir, size))
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* rm -rf the directory made from tmpl, if it was made. */
#define IVM_TMP_REMOVE_TREE(tmpl) ivm_tmp_remove_tree_((tmpl), sizeof(tmpl))

#endif /* IVM_TEST_TMP_FILES_H */
