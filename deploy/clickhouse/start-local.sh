#!/usr/bin/env bash
# Starts Debian's clickhouse-server on 127.0.0.1 with its data under a fresh temporary folder.
# Prints "export SAMLA_CLICKHOUSE_DSN=…" and "CLICKHOUSE_PID=…" for the caller to eval.
# Usage: eval "$(deploy/clickhouse/start-local.sh [tcp_port])"  (default: the first free port from 19000)
set -euo pipefail
port="${1:-}"
if [ -z "$port" ]; then
  # First free pair of ports from 19000 up: CI may share the machine with another server.
  for candidate in $(seq 19000 2 19100); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null && ! (exec 3<>"/dev/tcp/127.0.0.1/$((candidate + 1))") 2>/dev/null; then
      port=$candidate
      break
    fi
  done
fi
http_port=$((port + 1))
dir="$(mktemp -d /tmp/samla-clickhouse.XXXXXX)"
mkdir -p "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas" "$dir/log"
cat > "$dir/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$dir/log/server.log</log><errorlog>$dir/log/error.log</errorlog><size>10M</size><count>2</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>$port</tcp_port>
  <http_port>$http_port</http_port>
  <path>$dir/data/</path>
  <tmp_path>$dir/tmp/</tmp_path>
  <user_files_path>$dir/user_files/</user_files_path>
  <format_schema_path>$dir/format_schemas/</format_schema_path>
  <users_config>$dir/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
</yandex>
XML
cat > "$dir/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage><allow_experimental_low_cardinality_type>1</allow_experimental_low_cardinality_type></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
XML
server="$(command -v clickhouse-server || echo /usr/sbin/clickhouse-server)"
nohup "$server" --config-file="$dir/config.xml" >"$dir/log/stdout.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$http_port") 2>/dev/null && curl -fsS "http://127.0.0.1:$http_port/ping" >/dev/null 2>&1; then
    echo "export SAMLA_CLICKHOUSE_DSN=clickhouse://127.0.0.1:$port/default"
    echo "CLICKHOUSE_PID=$pid"
    echo "CLICKHOUSE_DIR=$dir"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "clickhouse-server exited; log:" >&2
    cat "$dir/log/stdout.log" "$dir/log/error.log" >&2 2>/dev/null || true
    exit 1
  fi
  sleep 0.2
done
echo "clickhouse-server did not answer on 127.0.0.1:$http_port in 20 s" >&2
kill "$pid" 2>/dev/null || true
exit 1
