//go:build tools

// The command this module builds; nothing here is compiled into it.
package tools

import _ "github.com/oauth2-proxy/oauth2-proxy/v7"
