/* SPDX-License-Identifier: MIT */
/*
 * The version of this build and the git revision it was built from.
 * VERSION at the top of the tree is the one place the version is written;
 * the Makefile generates ivm_version.h from it and from git (in
 * $(BUILD)/gen/, rewritten only when either changes), defining
 * IVM_VERSION ("0.1.0") and IVM_GIT_REV ("1a2b3c4d5e6f", "-dirty" appended
 * for a modified tree, "unknown" outside git).
 */
#ifndef IVM_VERSION_H
#define IVM_VERSION_H
#include "ivm_version.h"
#endif
