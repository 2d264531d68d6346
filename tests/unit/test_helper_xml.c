// SPDX-License-Identifier: MIT
/*
 * The helper channel's socket path from a domain XML
 * (ivm_libvirt_channel_path_from_xml): what libvirt emits, and what it
 * might emit around it.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "access/libvirt_domain.h"

#define NAME "org.idlevm.helper.0"

static char *lookup(const char *xml, enum ivm_error_code *code)
{
	struct ivm_error *err;
	char *path = NULL;

	err = ivm_libvirt_channel_path_from_xml(xml, NAME, &path);
	*code = err ? err->code : IVM_ERROR_OTHER;
	ivm_error_destroy(err);
	return err ? NULL : path;
}

static void expect_path(const char *xml, const char *want)
{
	enum ivm_error_code code;
	char *path = lookup(xml, &code);

	cr_assert_not_null(path, "no path found in: %s", xml);
	cr_assert_str_eq(path, want);
	free(path);
}

static void expect_error(const char *xml, enum ivm_error_code want)
{
	enum ivm_error_code code;
	char *path = lookup(xml, &code);

	cr_assert_null(path, "unexpected path %s in: %s", path, xml);
	cr_assert_eq(code, want);
}

Test(helper_xml, libvirt_live_xml)
{
	expect_path(
		"<domain type='qemu' id='16'>\n"
		"  <name>guest</name>\n"
		"  <devices>\n"
		"    <serial type='pty'><source path='/dev/pts/3'/>"
		"<target type='isa-serial' port='0'/></serial>\n"
		"    <channel type='unix'>\n"
		"      <source mode='bind' path='/var/lib/libvirt/qemu/channel/target/domain-16-guest/org.qemu.guest_agent.0'/>\n"
		"      <target type='virtio' name='org.qemu.guest_agent.0' state='disconnected'/>\n"
		"      <alias name='channel0'/>\n"
		"    </channel>\n"
		"    <channel type='unix'>\n"
		"      <source mode='bind' path='/var/lib/libvirt/qemu/channel/target/domain-16-guest/org.idlevm.helper.0'/>\n"
		"      <target type='virtio' name='org.idlevm.helper.0' state='connected'/>\n"
		"      <alias name='channel1'/>\n"
		"      <address type='virtio-serial' controller='0' bus='0' port='2'/>\n"
		"    </channel>\n"
		"  </devices>\n"
		"</domain>\n",
		"/var/lib/libvirt/qemu/channel/target/domain-16-guest/org.idlevm.helper.0");
}

Test(helper_xml, quotes_order_entities_and_noise)
{
	expect_path(
		"<?xml version=\"1.0\"?>\n<!DOCTYPE domain>\n"
		"<!-- <channel type='unix'><source path='/comment'/>"
		"<target type='virtio' name='org.idlevm.helper.0'/></channel> -->"
		"<domain><devices><channel type=\"unix\">"
		"<target name=\"org.idlevm.helper.0\" type=\"virtio\"/>"
		"<![CDATA[ <source path='/cdata'/> ]]>"
		"<source path=\"/tmp/a&amp;b&apos;c&#x3e;d&#62;e\" mode='bind'/>"
		"</channel></devices></domain>",
		"/tmp/a&b'c>d>e");
	/* '>' inside a quoted value does not end the tag. */
	expect_path("<channel type='unix'><source path='/x>y'/>"
		    "<target type='virtio' name='" NAME "'/></channel>",
		    "/x>y");
}

Test(helper_xml, not_our_channel)
{
	/* Another name, another target type, a pty channel, a grandchild
	 * source, no source path: none of them is the helper's socket. */
	expect_error("<domain><devices><channel type='unix'>"
		     "<source path='/s'/><target type='virtio' name='org.qemu.guest_agent.0'/>"
		     "</channel></devices></domain>", IVM_ERROR_NOT_FOUND);
	expect_error("<channel type='unix'><source path='/s'/>"
		     "<target type='guestfwd' name='" NAME "'/></channel>",
		     IVM_ERROR_NOT_FOUND);
	expect_error("<channel type='pty'><source path='/dev/pts/1'/>"
		     "<target type='virtio' name='" NAME "'/></channel>",
		     IVM_ERROR_NOT_FOUND);
	expect_error("<channel type='unix'><x><source path='/deep'/></x>"
		     "<target type='virtio' name='" NAME "'/></channel>",
		     IVM_ERROR_NOT_FOUND);
	expect_error("<channel type='unix'><source mode='bind'/>"
		     "<target type='virtio' name='" NAME "'/></channel>",
		     IVM_ERROR_NOT_FOUND);
	expect_error("<channel type='unix'><source path=''/>"
		     "<target type='virtio' name='" NAME "'/></channel>",
		     IVM_ERROR_NOT_FOUND);
	expect_error("<channel type='unix'/>", IVM_ERROR_NOT_FOUND);
	expect_error("", IVM_ERROR_NOT_FOUND);
	/* The name must match whole. */
	expect_error("<channel type='unix'><source path='/s'/>"
		     "<target type='virtio' name='" NAME "x'/></channel>",
		     IVM_ERROR_NOT_FOUND);
}

Test(helper_xml, malformed_markup)
{
	expect_error("<channel type='unix'><source path='/s", IVM_ERROR_PROTOCOL);
	expect_error("<!-- never closed", IVM_ERROR_PROTOCOL);
	expect_error("< >", IVM_ERROR_PROTOCOL);
	expect_error("<channel type='unix'><source path='/a&bogus;b'/>"
		     "<target type='virtio' name='" NAME "'/></channel>",
		     IVM_ERROR_PROTOCOL);
	/* A NUL through a character reference would cut the path. */
	expect_error("<channel type='unix'><source path='/a&#0;b'/>"
		     "<target type='virtio' name='" NAME "'/></channel>",
		     IVM_ERROR_PROTOCOL);
}
