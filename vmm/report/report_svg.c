// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_svg.h"

#define SVG_WIDTH	1200.0
#define FRAME_HEIGHT	17
#define PAD_TOP		50
#define PAD_BOTTOM	30
#define PAD_SIDE	10.0
#define MIN_WIDTH_PX	0.3	/* narrower frames are not drawn */
#define MAX_DEPTH	2048

enum frame_style { STYLE_ROOT, STYLE_KIND, STYLE_TASK, STYLE_USER,
		   STYLE_KERNEL, STYLE_INLINED };

struct flame {
	char *name;
	int kind;		/* -1 for the root */
	enum frame_style style;
	uint64_t count;
	uint32_t first_child, next_sibling;
	uint32_t depth;
};

struct flames {
	struct flame *v;
	uint32_t nr, cap;
	uint32_t max_depth;
	bool failed;
	bool time;		/* counts are nanoseconds (report --value) */
};

#define NONE UINT32_MAX

static uint32_t flame_child(struct flames *fl, uint32_t parent,
			    const char *name, int kind, enum frame_style style)
{
	uint32_t c;
	struct flame *f;

	for (c = fl->v[parent].first_child; c != NONE; c = fl->v[c].next_sibling)
		if (fl->v[c].style == style && !strcmp(fl->v[c].name, name))
			return c;
	if (fl->nr == fl->cap) {
		uint32_t ncap = fl->cap ? fl->cap * 2 : 1024;
		struct flame *n;

		if (ncap < fl->cap || !(n = realloc(fl->v, ncap * sizeof(*n)))) {
			fl->failed = true;
			return NONE;
		}
		fl->v = n;
		fl->cap = ncap;
	}
	f = &fl->v[fl->nr];
	*f = (struct flame){
		.name = strdup(name), .kind = kind, .style = style,
		.first_child = NONE, .depth = fl->v[parent].depth + 1,
	};
	if (!f->name) {
		fl->failed = true;
		return NONE;
	}
	/* Append, so siblings keep first-seen order. */
	if (fl->v[parent].first_child == NONE) {
		fl->v[parent].first_child = fl->nr;
	} else {
		for (c = fl->v[parent].first_child; fl->v[c].next_sibling != NONE;
		     c = fl->v[c].next_sibling)
			;
		fl->v[c].next_sibling = fl->nr;
	}
	f->next_sibling = NONE;
	if (f->depth > fl->max_depth)
		fl->max_depth = f->depth;
	return fl->nr++;
}

static void xml_escape(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '&': fputs("&amp;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&apos;", out); break;
		default:
			/* Control bytes are not allowed in XML 1.0. */
			fputc((unsigned char)*s < 0x20 ? '?' : *s, out);
		}
	}
}

static unsigned int name_hash(const char *s)
{
	unsigned int h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/*
 * Colour families per kind: to-idle blue, from-idle orange, on-cpu green,
 * switch purple.
 */
static void frame_colour(const struct flame *f, char *buf, size_t len)
{
	static const int hue[IVM_SAMPLE_NR_KINDS] = { 212, 28, 115, 280 };
	unsigned int h = name_hash(f->name);
	int base = f->kind >= 0 && f->kind < IVM_SAMPLE_NR_KINDS ?
		   hue[f->kind] : 0;
	int light;

	switch (f->style) {
	case STYLE_ROOT:
		snprintf(buf, len, "rgb(200,200,200)");
		return;
	case STYLE_KIND:
		light = 45;
		break;
	case STYLE_TASK:
		light = 78;
		break;
	case STYLE_KERNEL:
		light = 52 + (int)(h % 10);
		break;
	case STYLE_INLINED:
		light = 74 + (int)(h % 8);
		break;
	default:
		light = 63 + (int)(h % 10);
		break;
	}
	snprintf(buf, len, "hsl(%d,%d%%,%d%%)", base + (int)(h % 14) - 7,
		 f->style == STYLE_TASK ? 25 : 70, light);
}

static const char svg_script[] =
"<script type=\"text/ecmascript\"><![CDATA[\n"
"var W=%g, PAD=%g, frames=[], zoomed=null;\n"
"function init(){\n"
" frames=[].slice.call(document.querySelectorAll('g.f'));\n"
" frames.forEach(function(g){g.addEventListener('click',function(){zoom(g);});});\n"
" document.getElementById('reset').addEventListener('click',function(){zoom(null);});\n"
" document.getElementById('search').addEventListener('click',search);\n"
" layout(0,TOTAL);\n"
"}\n"
"function layout(x0,x1){\n"
" var scale=(W-2*PAD)/(x1-x0);\n"
" frames.forEach(function(g){\n"
"  var x=+g.getAttribute('data-x'), w=+g.getAttribute('data-w');\n"
"  var r=g.querySelector('rect'), t=g.querySelector('text');\n"
"  var a=Math.max(x,x0), b=Math.min(x+w,x1);\n"
"  if(b<=a){g.style.display='none';return;}\n"
"  g.style.display='';\n"
"  var px=PAD+(a-x0)*scale, pw=(b-a)*scale;\n"
"  r.setAttribute('x',px); r.setAttribute('width',Math.max(pw-0.5,0.1));\n"
"  t.setAttribute('x',px+3);\n"
"  var name=g.getAttribute('data-n'), n=Math.floor((pw-6)/7);\n"
"  t.textContent= n<3 ? '' : (name.length<=n ? name : name.slice(0,n-2)+'..');\n"
" });\n"
"}\n"
"function zoom(g){\n"
" if(!g){layout(0,TOTAL);zoomed=null;return;}\n"
" var x=+g.getAttribute('data-x'), w=+g.getAttribute('data-w');\n"
" zoomed=g; layout(x,x+w);\n"
"}\n"
"function search(){\n"
" var term=prompt('Search frames (regular expression):','');\n"
" var info=document.getElementById('matched');\n"
" frames.forEach(function(g){var r=g.querySelector('rect');\n"
"  if(r.hasAttribute('data-fill')){r.setAttribute('fill',r.getAttribute('data-fill'));r.removeAttribute('data-fill');}});\n"
" if(!term){info.textContent='';return;}\n"
" var re; try{re=new RegExp(term);}catch(e){info.textContent='bad expression';return;}\n"
" var spans=[];\n"
" frames.forEach(function(g){\n"
"  if(!re.test(g.getAttribute('data-n')))return;\n"
"  var r=g.querySelector('rect'); r.setAttribute('data-fill',r.getAttribute('fill'));\n"
"  r.setAttribute('fill','rgb(230,0,230)');\n"
"  spans.push([+g.getAttribute('data-x'),+g.getAttribute('data-w')]);\n"
" });\n"
" spans.sort(function(a,b){return a[0]-b[0];});\n"
" var sum=0,end=-1;\n"
" spans.forEach(function(s){var a=Math.max(s[0],end),b=s[0]+s[1];if(b>a){sum+=b-a;end=b;}});\n"
" info.textContent='Matched: '+(100*sum/TOTAL).toFixed(1)+'%%';\n"
"}\n"
"window.addEventListener('load',init);\n"
"]]></script>\n";

static void emit(FILE *out, const struct flames *fl, uint32_t idx,
		 uint64_t x, double scale, double height)
{
	/* Iterative over siblings, recursive over depth (bounded). */
	for (; idx != NONE; idx = fl->v[idx].next_sibling) {
		const struct flame *f = &fl->v[idx];
		double px = PAD_SIDE + (double)x * scale;
		double pw = (double)f->count * scale;
		double y = height - PAD_BOTTOM - (double)(f->depth + 1) *
			   FRAME_HEIGHT;
		char colour[40];

		if (pw >= MIN_WIDTH_PX) {
			frame_colour(f, colour, sizeof(colour));
			fprintf(out, "<g class=\"f\" data-x=\"%" PRIu64
				"\" data-w=\"%" PRIu64 "\" data-n=\"", x,
				f->count);
			xml_escape(out, f->name);
			fprintf(out, "\"><title>");
			xml_escape(out, f->name);
			if (fl->time)
				fprintf(out, " (%.3f ms)", (double)f->count / 1e6);
			else
				fprintf(out, " (%" PRIu64 " samples)", f->count);
			fprintf(out, "</title>"
				"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\" rx=\"2\"/>"
				"<text x=\"%.1f\" y=\"%.1f\"></text></g>\n",
				px, y, pw > 0.5 ? pw - 0.5 : pw,
				FRAME_HEIGHT - 1, colour, px + 3,
				y + FRAME_HEIGHT - 5);
			if (f->depth < MAX_DEPTH)
				emit(out, fl, f->first_child, x, scale, height);
		}
		x += f->count;
	}
}

/* Step into (or create) a child frame and count the stack there. */
static uint32_t step(struct flames *fl, uint32_t at, const char *name,
		     int kind, enum frame_style style, uint64_t count)
{
	if (at == NONE)
		return NONE;
	at = flame_child(fl, at, name, kind, style);
	if (at != NONE)
		fl->v[at].count += count;
	return at;
}

static void add_stack(struct flames *fl, const struct ivm_calltree *tree,
		      const struct ivm_report_options *opts, uint32_t leaf,
		      int kind, uint64_t count, struct ivm_report_frame *frames)
{
	struct ivm_report_context ctx;
	uint32_t process, thread, at;
	char buf[512];
	size_t n, j;

	n = ivm_report_stack(tree, opts, leaf, frames, IVM_REPORT_MAX_STACK,
			     &process, &thread);
	ivm_report_context_of(tree, leaf, &ctx);
	fl->v[0].count += count;
	at = step(fl, 0, kind == IVM_SAMPLE_TO_IDLE ? "to-idle" :
		  kind == IVM_SAMPLE_FROM_IDLE ? "from-idle" :
		  kind == IVM_SAMPLE_SWITCH ? "switch" : "on-cpu",
		  kind, STYLE_KIND, count);
	if (ctx.group != IVM_CALLTREE_NONE)
		at = step(fl, at, ivm_report_group_name(tree, ctx.group, buf,
							sizeof(buf)),
			  kind, STYLE_TASK, count);
	if (process != IVM_CALLTREE_NONE)
		at = step(fl, at, ivm_report_task_name(
			ivm_calltree_node(tree, process), buf, sizeof(buf)),
			kind, STYLE_TASK, count);
	if (thread != IVM_CALLTREE_NONE)
		at = step(fl, at, ivm_report_task_name(
			ivm_calltree_node(tree, thread), buf, sizeof(buf)),
			kind, STYLE_TASK, count);
	for (j = 0; ctx.labels != IVM_CALLTREE_NONE &&
	     j < ivm_report_nr_labels(tree, ctx.labels); j++)
		at = step(fl, at, ivm_report_label_name(tree, ctx.labels, j,
							buf, sizeof(buf)),
			  kind, STYLE_TASK, count);
	while (n-- && at != NONE) {
		const struct ivm_report_frame *f = &frames[n];

		ivm_report_frame_name(f, false, buf, sizeof(buf) - 16);
		if (f->type == IVM_NODE_KERNEL)
			strcat(buf, " [k]");
		if (f->inlined)
			strcat(buf, " [inlined]");
		at = step(fl, at, buf, kind,
			  f->inlined ? STYLE_INLINED :
			  f->type == IVM_NODE_KERNEL ? STYLE_KERNEL : STYLE_USER,
			  count);
	}
}

struct ivm_error *ivm_report_svg(const struct ivm_calltree *tree,
				 const struct ivm_report_options *opts)
{
	struct flames fl = { 0 };
	struct ivm_report_frame *frames;
	FILE *out = opts->out;
	uint32_t i, nr = ivm_calltree_nr_nodes(tree);
	double height, scale;
	int kind;

	frames = calloc(IVM_REPORT_MAX_STACK, sizeof(*frames));
	fl.v = calloc(1024, sizeof(*fl.v));
	if (!frames || !fl.v) {
		free(frames);
		free(fl.v);
		return &ivm_enomem;
	}
	fl.cap = 1024;
	fl.nr = 1;
	fl.time = opts->value != IVM_VALUE_COUNT;
	fl.v[0] = (struct flame){ .name = strdup("all"), .kind = -1,
				  .style = STYLE_ROOT, .first_child = NONE,
				  .next_sibling = NONE };
	if (!fl.v[0].name)
		fl.failed = true;
	for (kind = 0; kind < IVM_SAMPLE_NR_KINDS && !fl.failed; kind++) {
		if (opts->kind >= 0 && opts->kind != kind)
			continue;
		for (i = 0; i < nr && !fl.failed; i++) {
			const struct ivm_calltree_node *node =
				ivm_calltree_node(tree, i);

			uint64_t w = ivm_report_self(node, kind, opts->value);

			if (w)
				add_stack(&fl, tree, opts, i, kind, w, frames);
		}
	}
	free(frames);
	if (fl.failed) {
		for (i = 0; i < fl.nr; i++)
			free(fl.v[i].name);
		free(fl.v);
		return &ivm_enomem;
	}

	height = PAD_TOP + PAD_BOTTOM + (double)(fl.max_depth + 1) * FRAME_HEIGHT;
	scale = fl.v[0].count ? (SVG_WIDTH - 2 * PAD_SIDE) /
				(double)fl.v[0].count : 0;
	fprintf(out,
		"<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<style>text{font:12px monospace;fill:#000;pointer-events:none}"
		"g.f:hover rect{stroke:#000;stroke-width:0.6}"
		".b{font:13px sans-serif;cursor:pointer;fill:#225}"
		"#title{font:17px sans-serif}</style>\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"#f8f8f4\"/>\n"
		"<text id=\"title\" x=\"%g\" y=\"24\" text-anchor=\"middle\">",
		SVG_WIDTH, height, SVG_WIDTH, height, SVG_WIDTH / 2);
	xml_escape(out, opts->title ? opts->title : "idlevm: guest idle transitions");
	fprintf(out, "</text>\n"
		"<text class=\"b\" id=\"reset\" x=\"%g\" y=\"24\">[reset zoom]</text>\n"
		"<text class=\"b\" id=\"search\" x=\"%g\" y=\"24\">[search]</text>\n"
		"<text id=\"matched\" x=\"%g\" y=\"%g\"></text>\n"
		"<text x=\"%g\" y=\"42\" style=\"font:12px sans-serif\">"
		"<tspan fill=\"hsl(212,70%%,45%%)\">&#9632; to-idle</tspan>  "
		"<tspan fill=\"hsl(28,70%%,45%%)\">&#9632; from-idle</tspan>  "
		"<tspan fill=\"hsl(115,70%%,45%%)\">&#9632; on-cpu</tspan>  "
		"(darker: kernel, lighter: inlined; click to zoom)</text>\n",
		PAD_SIDE, SVG_WIDTH - 80, SVG_WIDTH - 200, height - 10,
		PAD_SIDE);
	fprintf(out, "<script type=\"text/ecmascript\">var TOTAL=%" PRIu64
		";</script>\n", fl.v[0].count ? fl.v[0].count : 1);
	fprintf(out, svg_script, SVG_WIDTH, PAD_SIDE);
	emit(out, &fl, 0, 0, scale, height);
	fprintf(out, "</svg>\n");

	for (i = 0; i < fl.nr; i++)
		free(fl.v[i].name);
	free(fl.v);
	if (ferror(out))
		return ivm_error_os(errno ? errno : EIO, "writing the flame graph");
	return NULL;
}
