"""OpenStack Keystone: login, project-scoped tokens, token validation and its cache."""
