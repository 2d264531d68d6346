/* SPDX-License-Identifier: MIT */
/*
 * SVG flame graph writer: one self-contained file (inline CSS and
 * JavaScript, no network) with click-to-zoom, reset, and search that
 * highlights matching frames and says what share of samples they hold.
 *
 * The root's children are the sample kinds, and each kind has its own
 * colour family (to-idle blue, from-idle orange, on-cpu green; kernel
 * frames darker, inlined frames lighter), so to-idle and from-idle stand
 * apart at a glance.  Every name is XML-escaped.
 */
#ifndef IVM_REPORT_SVG_H
#define IVM_REPORT_SVG_H

#include "base/error.h"
#include "report/report.h"

struct ivm_error *ivm_report_svg(const struct ivm_calltree *tree,
				 const struct ivm_report_options *opts);

#endif /* IVM_REPORT_SVG_H */
