# Sourced by .ci/run: make the PostgreSQL tests runnable when a server is (or can be) there.
# Starts the Debian cluster if it is installed but stopped, then exports NMEM_TEST_PG when the
# server answers; otherwise the tests marked `postgres` skip and say why.
if [ -z "${NMEM_TEST_PG:-}" ]; then
    pg_url="postgresql://postgres@127.0.0.1:5432/test"
    if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
        for version in $(ls /etc/postgresql); do
            pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 || true
        done
    fi
    if command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h 127.0.0.1 -p 5432 -t 5; then
        export NMEM_TEST_PG="$pg_url"
        echo "postgres tests: on, $NMEM_TEST_PG" >&2
    else
        echo "postgres tests: skipped (no PostgreSQL answers at 127.0.0.1:5432)" >&2
    fi
fi
