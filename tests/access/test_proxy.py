"""The authenticating sidecar as pure functions: exact dicts, the Kubernetes schema, Pod Security
"restricted", and the configuration file it reads. tests/access/test_proxy_binary.py runs the
same configuration with the real binary."""

import dataclasses

import kubernetes_validate
import pytest
import yaml

from access.proxy import (
    CLIENT_SECRET_KEY,
    CONFIG_KEY,
    COOKIE_SECRET_KEY,
    ERROR_PAGE_KEY,
    PROXY_FILE_PATHS,
    ProxySpec,
    make_proxy_container,
    make_proxy_volumes,
    proxy_command,
    proxy_config,
    proxy_files,
)

JUPYTER = ProxySpec(
    image="quay.io/oauth2-proxy/oauth2-proxy:v7.15.4",
    issuer_url="https://portal.example.org/o",
    backend_url="http://gpu-portal.gpu-portal.svc:8000/o",
    client_id="Yq3w9Zk2",
    secret_name="wl-42-my-notebook",
    upstream_port=8888,
    upstream_token_env="JUPYTER_TOKEN",
    tls_secret="workloads-tls",
)
PUBLIC_PLAIN = ProxySpec(
    image="quay.io/oauth2-proxy/oauth2-proxy:v7.15.4",
    issuer_url="http://127.0.0.1:8000/o",
    backend_url="http://127.0.0.1:8000/o",
    client_id="c.7",
    secret_name="wl-7-board",
    upstream_port=6006,
    public=True,
    cookie_refresh_seconds=30,
    session_seconds=3600,
)
SECRET = {"name": "wl-42-my-notebook"}
COMMON_ARGS = ["--alpha-config=config/config.yaml", "--custom-templates-dir=config/templates",
               "--email-domain=*", "--skip-provider-button=true"]
LOGGING_ARGS = [
    "--ping-path=/oauth2/ping", "--ready-path=/oauth2/ready", "--silence-ping-logging=true",
    "--request-logging-format={{.Client}} - {{.RequestID}} - {{.Username}} [{{.Timestamp}}] "
    "{{.Host}} {{.RequestMethod}} {{.Upstream}} {{.Protocol}} {{.UserAgent}} {{.StatusCode}} "
    "{{.ResponseSize}} {{.RequestDuration}}",
]
RESTRICTED = {
    "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"}, "readOnlyRootFilesystem": True,
}
RESOURCES = {"cpu": "100m", "memory": "64Mi"}


def test_the_jupyter_sidecar():
    assert make_proxy_container(JUPYTER) == {
        "name": "auth-proxy",
        "image": "quay.io/oauth2-proxy/oauth2-proxy:v7.15.4",
        "args": [*COMMON_ARGS, "--cookie-name=_auth_proxy_Yq3w9Zk2", "--cookie-secure=true",
                 "--cookie-samesite=lax", "--cookie-expire=28800s", "--cookie-refresh=60s",
                 *LOGGING_ARGS, "--skip-jwt-bearer-tokens=true"],
        "workingDir": "/etc/auth-proxy",
        "env": [
            {"name": "OAUTH2_PROXY_COOKIE_SECRET",
             "valueFrom": {"secretKeyRef": {**SECRET, "key": "auth-proxy-cookie-secret"}}},
            {"name": "AUTH_PROXY_CLIENT_SECRET",
             "valueFrom": {"secretKeyRef": {**SECRET, "key": "auth-proxy-client-secret"}}},
            {"name": "AUTH_PROXY_UPSTREAM_TOKEN",
             "valueFrom": {"secretKeyRef": {**SECRET, "key": "JUPYTER_TOKEN"}}},
            {"name": "AUTH_PROXY_UPSTREAM_AUTHORIZATION",
             "value": "token $(AUTH_PROXY_UPSTREAM_TOKEN)"},
            {"name": "GOMEMLIMIT", "value": "48MiB"},
        ],
        "ports": [{"name": "http", "containerPort": 4180, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/oauth2/ping", "port": "http", "scheme": "HTTPS"},
                           "periodSeconds": 5, "failureThreshold": 3},
        "resources": {"requests": RESOURCES, "limits": RESOURCES},
        "securityContext": RESTRICTED,
        "volumeMounts": [
            {"name": "auth-proxy-config", "mountPath": "/etc/auth-proxy/config", "readOnly": True},
            {"name": "auth-proxy-tls", "mountPath": "/etc/auth-proxy/tls", "readOnly": True},
        ],
    }
    assert make_proxy_volumes(JUPYTER) == [
        {"name": "auth-proxy-config",
         "secret": {"secretName": "wl-42-my-notebook",
                    "items": [{"key": "auth-proxy.yaml", "path": "config.yaml"},
                              {"key": "auth-proxy-error.html", "path": "templates/error.html"}]}},
        {"name": "auth-proxy-tls",
         "secret": {"secretName": "workloads-tls",
                    "items": [{"key": "tls.crt", "path": "tls.crt"},
                              {"key": "tls.key", "path": "tls.key"}]}},
    ]


def test_a_public_plain_http_sidecar_asks_no_login_and_reads_no_token():
    container = make_proxy_container(PUBLIC_PLAIN)
    assert container["args"] == [
        *COMMON_ARGS, "--cookie-name=_auth_proxy_c_7", "--cookie-secure=false",
        "--cookie-samesite=lax", "--cookie-expire=3600s", "--cookie-refresh=30s", *LOGGING_ARGS,
        "--skip-auth-route=^/"]
    assert [e["name"] for e in container["env"]] == [
        "OAUTH2_PROXY_COOKIE_SECRET", "AUTH_PROXY_CLIENT_SECRET", "GOMEMLIMIT"]
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTP"
    assert container["volumeMounts"] == [
        {"name": "auth-proxy-config", "mountPath": "/etc/auth-proxy/config", "readOnly": True}]
    assert [v["name"] for v in make_proxy_volumes(PUBLIC_PLAIN)] == ["auth-proxy-config"]


def test_the_configuration_file():
    config = yaml.safe_load(proxy_files(JUPYTER)[CONFIG_KEY])
    assert config == proxy_config(JUPYTER)
    assert config == {
        "server": {"secureBindAddress": ":4180",
                   "tls": {"cert": {"fromFile": "tls/tls.crt"}, "key": {"fromFile": "tls/tls.key"},
                           "minVersion": "TLS1.2"}},
        "upstreamConfig": {"upstreams": [{"id": "app", "path": "/", "uri": "http://127.0.0.1:8888/",
                                          "timeout": "300s"}]},
        "injectRequestHeaders": [{
            "name": "Authorization",
            "values": [{"secretSource": {"fromEnv": "AUTH_PROXY_UPSTREAM_AUTHORIZATION"}}]}],
        "providers": [{
            "id": "portal", "provider": "oidc", "name": "GPU portal", "clientID": "Yq3w9Zk2",
            "clientSecret": "${AUTH_PROXY_CLIENT_SECRET}",
            "loginURL": "https://portal.example.org/o/authorize/",
            "redeemURL": "http://gpu-portal.gpu-portal.svc:8000/o/token/",
            "scope": "openid email profile",
            "code_challenge_method": "S256",
            "oidcConfig": {
                "issuerURL": "https://portal.example.org/o",
                "skipDiscovery": True,
                "jwksURL": "http://gpu-portal.gpu-portal.svc:8000/o/.well-known/jwks.json",
                "emailClaim": "email", "audienceClaims": ["aud"],
                "enabledSigningAlgs": ["RS256"]},
        }],
    }
    # the client secret is substituted into a literal block: any value stays one string
    assert "clientSecret: |-\n    ${AUTH_PROXY_CLIENT_SECRET}\n" in proxy_files(JUPYTER)[CONFIG_KEY]
    # without an application token the client's Authorization is only removed
    plain = yaml.safe_load(proxy_files(PUBLIC_PLAIN)[CONFIG_KEY])
    assert plain["injectRequestHeaders"] == [{"name": "Authorization"}]
    assert plain["server"] == {"bindAddress": ":4180"}


def test_the_files_are_the_mounted_keys_and_the_error_page_explains_an_outage():
    files = proxy_files(JUPYTER)
    assert set(files) == set(PROXY_FILE_PATHS) == {CONFIG_KEY, ERROR_PAGE_KEY}
    mounted = make_proxy_volumes(JUPYTER)[0]["secret"]["items"]
    assert {i["key"] for i in mounted} == set(files)
    page = files[ERROR_PAGE_KEY]
    assert page.startswith('{{define "error.html"}}')
    assert "the portal did not answer" in page


def test_the_local_command_is_the_pods():
    secrets = {CLIENT_SECRET_KEY: "cs", COOKIE_SECRET_KEY: "k" * 32, "JUPYTER_TOKEN": "jt"}
    argv, env = proxy_command(JUPYTER, binary="/bin/oauth2-proxy", secrets=secrets)
    assert argv == ["/bin/oauth2-proxy", *make_proxy_container(JUPYTER)["args"]]
    assert env == {"OAUTH2_PROXY_COOKIE_SECRET": "k" * 32, "AUTH_PROXY_CLIENT_SECRET": "cs",
                   "AUTH_PROXY_UPSTREAM_TOKEN": "jt",
                   "AUTH_PROXY_UPSTREAM_AUTHORIZATION": "token jt"}
    assert {e["name"] for e in make_proxy_container(JUPYTER)["env"]} == {*env, "GOMEMLIMIT"}


def _pod(spec: ProxySpec) -> dict:
    app = {"name": "app", "image": "quay.io/jupyter/base-notebook:2024-06-17",
           "ports": [{"name": "app", "containerPort": spec.upstream_port}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [app, make_proxy_container(spec)],
                     "volumes": make_proxy_volumes(spec)}}


@pytest.mark.parametrize("spec", [JUPYTER, PUBLIC_PLAIN], ids=["jupyter-tls", "public-http"])
def test_valid_against_the_kubernetes_schema(spec):
    kubernetes_validate.validate(_pod(spec), kubernetes_validate.utils.latest_version(),
                                 strict=True)


def test_the_sidecar_passes_pod_security_restricted_on_its_own():
    # the container-level checks of the "restricted" level (the pod's own are the pod's):
    # https://kubernetes.io/docs/concepts/security/pod-security-standards/
    context = make_proxy_container(JUPYTER)["securityContext"]
    assert context["runAsNonRoot"] is True and context["runAsUser"] != 0
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"]["type"] in ("RuntimeDefault", "Localhost")
    for volume in make_proxy_volumes(JUPYTER):
        assert set(volume) - {"name"} <= {"secret", "configMap", "emptyDir", "projected"}


def test_deterministic_and_unshared():
    first = make_proxy_container(JUPYTER)
    first["args"].append("--x")
    first["resources"]["limits"]["cpu"] = "9"
    assert make_proxy_container(dataclasses.replace(JUPYTER)) == make_proxy_container(JUPYTER)
    assert "--x" not in make_proxy_container(JUPYTER)["args"]
    assert make_proxy_container(JUPYTER)["resources"]["limits"]["cpu"] == "100m"
