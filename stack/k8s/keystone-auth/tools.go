//go:build tools

// The command this module builds; nothing here is compiled into it.
package tools

import _ "k8s.io/cloud-provider-openstack/cmd/k8s-keystone-auth"
