// Pins Traefik, the gateway of the shared-address mode (PORTAL_SERVICE_EXPOSURE=shared:
// stack/k8s/traefik.py runs it with its Kubernetes Ingress provider). Traefik's own go.mod
// replaces one of its packages with a folder of its own tree (pkg/config/dynamic/ext, not
// served as a module), so no wrapper can require it as a library: stack/k8s/build.py builds
// ./cmd/traefik inside the module as the proxy serves it (its go.mod and go.sum), checked
// against the hashes below. Not v3.7.x: the module proxy refuses modules it pins
// (github.com/containous/go-http-auth, lego DNS providers: 403 "not available").
module gpu-portal.local/stack/k8s/traefik

go 1.26.0

require github.com/traefik/traefik/v3 v3.6.12
