"""What every app shares below them all: lock contention, the database-outage answers,
safe redirects, enqueueing on commit. It imports no app and not the project package."""
