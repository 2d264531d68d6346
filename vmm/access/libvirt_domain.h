/* SPDX-License-Identifier: MIT */
/*
 * A running guest managed by libvirt: the connection, the domain, and what
 * libvirt knows about it (its XML, its channels, the QEMU process).
 *
 * libvirt's own error printing is switched off; failures come back as
 * ivm_error with the libvirt message, and an unknown domain is
 * IVM_ERROR_NOT_FOUND with the names of the domains that do exist.
 */
#ifndef IVM_LIBVIRT_DOMAIN_H
#define IVM_LIBVIRT_DOMAIN_H

#include <sys/types.h>
#include <libvirt/libvirt.h>

#include "base/error.h"

struct ivm_libvirt_domain;

/*
 * Connect to uri (NULL: "qemu:///system") and look up the domain name.
 * Fails with IVM_ERROR_NOT_FOUND when there is no such domain and with
 * IVM_ERROR_INVALID when it exists but is not running.
 */
struct ivm_error *ivm_libvirt_domain_open(const char *uri, const char *name,
					  struct ivm_libvirt_domain **ret);
void ivm_libvirt_domain_close(struct ivm_libvirt_domain *dom);

virConnectPtr ivm_libvirt_domain_conn(struct ivm_libvirt_domain *dom);
virDomainPtr ivm_libvirt_domain_ptr(struct ivm_libvirt_domain *dom);
const char *ivm_libvirt_domain_name(struct ivm_libvirt_domain *dom);

/*
 * The host path of the unix socket behind the virtio-serial channel whose
 * target name is channel_name (e.g. "org.idlevm.helper.0") of domain dom
 * (dom_name for errors).  IVM_ERROR_NOT_FOUND when the domain has no such
 * channel or it is not a unix socket.  The caller frees the string.
 */
struct ivm_error *ivm_libvirt_channel_path(virDomainPtr dom,
					    const char *dom_name,
					    const char *channel_name,
					    char **ret);

/*
 * The same lookup on a domain XML document (no libvirt needed): the path of
 * the unix socket of the channel whose <target type='virtio'> has name
 * channel_name.  xml is untrusted text: the parser is bounded by its length,
 * never reads past its NUL, and fails with IVM_ERROR_PROTOCOL on malformed
 * markup it has to read.  The caller frees *ret.
 */
struct ivm_error *ivm_libvirt_channel_path_from_xml(const char *xml,
						    const char *channel_name,
						    char **ret);

/*
 * The names of the running domains of uri (NULL: "qemu:///system"),
 * sorted, into *ret (*nr of them; free with ivm_libvirt_free_names).
 */
struct ivm_error *ivm_libvirt_running_domains(const char *uri, char ***ret,
					      size_t *nr);
void ivm_libvirt_free_names(char **names, size_t nr);

/* An ivm_error from the last libvirt error, prefixed with what failed. */
struct ivm_error *ivm_libvirt_error(const char *what);

#endif /* IVM_LIBVIRT_DOMAIN_H */
