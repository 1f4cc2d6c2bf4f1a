//go:build tools

// Package tools pins versitygw's command (github.com/versity/versitygw/cmd/versitygw, Apache-2.0),
// which stack/k8s/build.py builds: an S3 server over a folder of the local file system.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
