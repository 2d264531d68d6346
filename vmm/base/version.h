/* SPDX-License-Identifier: MIT */
#ifndef IVM_VERSION_H
#define IVM_VERSION_H
#define IVM_VERSION "0.1.0"
#endif
