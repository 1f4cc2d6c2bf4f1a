//go:build tools

// The command this module builds; nothing here is compiled into it.
package tools

import _ "go.universe.tf/metallb/controller"
