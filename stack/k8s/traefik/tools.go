//go:build tools

// The command this module builds; nothing here is compiled into it.
package tools

import _ "github.com/traefik/traefik/v3/cmd/traefik"
