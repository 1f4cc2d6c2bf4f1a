// The `registry` command of CNCF Distribution (github.com/distribution/distribution/v3,
// Apache-2.0) with only the parts a registry on loopback needs: htpasswd and token
// authentication and the filesystem and in-memory storage drivers. Upstream's main also links
// the Azure, GCS and S3 drivers, the CloudFront middleware and the pull-through proxy, whose
// cloud SDKs would multiply what a fresh machine downloads and builds for nothing the tests use.
package main

import (
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/auth/token"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	// a failing command prints its error and exits non-zero itself
	_ = registry.RootCmd.Execute()
}
