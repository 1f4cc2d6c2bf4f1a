//go:build tools

// The command this module builds; nothing here is compiled into it.
package tools

import _ "sigs.k8s.io/jobset"
