"""API shapes of workload access (each serializes a plain dict)."""

from typing import Any

from rest_framework import serializers

from ..models import ServiceAccess


class WorkloadAccessSerializer(serializers.Serializer[dict[str, object]]):
    protected = serializers.BooleanField(help_text="the portal's login is in front of it")
    public = serializers.BooleanField(help_text="open to anyone (an admin allowed it)")
    who = serializers.ChoiceField(choices=ServiceAccess.choices,
                                  help_text="who of the project gets through")
    who_label = serializers.CharField()


class WorkloadTokenSerializer(serializers.Serializer[dict[str, object]]):
    token = serializers.CharField(help_text="send as `Authorization: Bearer <token>` to the "
                                            "workload's address")
    token_type = serializers.CharField()
    expires_at = serializers.DateTimeField()
    expires_in = serializers.IntegerField(help_text="seconds")
    url = serializers.CharField(help_text="the workload's address")


class ServiceAccessSerializer(serializers.Serializer[dict[str, object]]):
    who = serializers.ChoiceField(
        choices=ServiceAccess.choices, required=False,
        help_text="who of the project opens its service workloads; SSH (a shell and port "
                  "forwarding) is for members whatever this says: `readers` lets readers "
                  "open the services, never SSH into them")
    allow_public = serializers.BooleanField(required=False,
                                            help_text="admins only: the project may open "
                                                      "workloads to everyone")
    ssh_enabled = serializers.BooleanField(required=False,
                                           help_text="admins only: the project's members "
                                                     "may SSH into its workloads")


class SSHCertificateRequestSerializer(serializers.Serializer[dict[str, object]]):
    public_key = serializers.CharField(max_length=16384, trim_whitespace=True,
                                       help_text="your OpenSSH public key line (ed25519, ECDSA "
                                                 "or RSA ≥ 2048 bits)")


class SSHCertificateSerializer(serializers.Serializer[dict[str, object]]):
    certificate = serializers.CharField(help_text="an OpenSSH user certificate for the key "
                                                  "(…-cert-v01@openssh.com …)")
    principal = serializers.CharField(help_text="the login it admits: derived from your "
                                                "Keystone user id, never your name")
    valid_until = serializers.DateTimeField()
    ssh_config = serializers.CharField(help_text="an OpenSSH Host block; its ProxyCommand is "
                                                 "`gpuctl ssh-proxy ID`")
    known_hosts = serializers.CharField(help_text="the workload's host key, as a known_hosts "
                                                  "line under host_alias")
    host_alias = serializers.CharField()


class SSHReportSerializer(serializers.Serializer[dict[str, object]]):
    """What a workload's SSH server reports (sshd/): a session's start and end, and the open
    sessions to check."""

    event = serializers.ChoiceField(choices=["start", "check", "end"])
    session = serializers.UUIDField(required=False)
    user = serializers.CharField(max_length=255, required=False)
    serial = serializers.IntegerField(min_value=0, max_value=2**63 - 1, required=False)
    key_id = serializers.CharField(max_length=512, required=False, allow_blank=True)
    # the client's address as the workload's proxy saw it
    sessions = serializers.ListField(child=serializers.UUIDField(), max_length=1000,
                                     required=False)
    reason = serializers.CharField(max_length=255, required=False, allow_blank=True)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        # "from" is a keyword in Python: read it beside the declared fields
        value: dict[str, Any] = super().to_internal_value(data)
        given = data.get("from", "") if hasattr(data, "get") else ""
        if not isinstance(given, str) or len(given) > 255:
            raise serializers.ValidationError({"from": ["An address, at most 255 characters."]})
        value["from"] = given
        return value

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        needed = {"start": ("session", "user", "serial"), "check": ("sessions",),
                  "end": ("session",)}[data["event"]]
        missing = [field for field in needed if field not in data]
        if missing:
            raise serializers.ValidationError({field: ["This field is required."]
                                               for field in missing})
        return data
