"""What every app shares below them all: lock contention, the database-outage answers,
safe redirects, enqueueing on commit, the registry of extension points. It imports no app and
not the project package."""
