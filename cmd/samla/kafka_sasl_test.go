package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go/sasl/plain"

	"github.com/samla/samla/platform/kafka"
)

// useBroker points cfg at an embedded broker the test started, as an operator points samla at
// an external cluster: the brokers, and the SASL settings with the broker's password file.
func useBroker(cfg *Config, broker *kafka.Embedded) {
	cfg.KafkaBrokers = strings.Join(broker.Brokers(), ",")
	cfg.KafkaSASLMechanism = kafka.EmbeddedMechanism
	cfg.KafkaSASLUsername = kafka.EmbeddedUser
	cfg.KafkaSASLPasswordFile = broker.PasswordFile()
}

// The SASL settings for an external cluster: all three or none, a known mechanism, and only
// with --kafka-brokers (the embedded broker has its own credential, which they would not
// change).
func TestKafkaSASLConfig(t *testing.T) {
	full := func(mech string) map[string]string {
		return map[string]string{"SAMLA_KAFKA_BROKERS": "kafka-1:9092", "SAMLA_KAFKA_SASL_MECHANISM": mech,
			"SAMLA_KAFKA_SASL_USERNAME": "samla", "SAMLA_KAFKA_SASL_PASSWORD_FILE": "/run/secrets/kafka"}
	}
	without := func(env map[string]string, key string) map[string]string {
		delete(env, key)
		return env
	}
	checkValidation(t, []validationCase{
		{env: full("PLAIN")},
		{env: full("SCRAM-SHA-256")},
		{env: full("SCRAM-SHA-512")},
		{env: full("scram-sha-512"), err: "--kafka-sasl-mechanism must be"},
		{env: full("GSSAPI"), err: "--kafka-sasl-mechanism must be"},
		{env: without(full("PLAIN"), "SAMLA_KAFKA_BROKERS"), err: "the embedded broker generates its own credential"},
		{env: without(full("PLAIN"), "SAMLA_KAFKA_SASL_MECHANISM"), err: "--kafka-sasl-mechanism is required"},
		{env: without(full("PLAIN"), "SAMLA_KAFKA_SASL_USERNAME"), err: "--kafka-sasl-username is required"},
		{env: without(full("PLAIN"), "SAMLA_KAFKA_SASL_PASSWORD_FILE"), err: "--kafka-sasl-password-file is required"},
	})
}

// KafkaConn reads the password file (one trailing newline dropped) and refuses an empty or
// missing one; without a mechanism it gives a connection without SASL.
func TestKafkaConnPasswordFile(t *testing.T) {
	dir := t.TempDir()
	cfg := &Config{KafkaBrokers: "kafka-1:9092"}
	conn, err := cfg.KafkaConn()
	if err != nil || conn.SASL != nil || len(conn.Brokers) != 1 {
		t.Fatalf("no SASL: %+v, %v", conn, err)
	}
	cfg.KafkaSASLMechanism, cfg.KafkaSASLUsername = "PLAIN", "samla"
	cfg.KafkaSASLPasswordFile = filepath.Join(dir, "missing")
	if _, err := cfg.KafkaConn(); err == nil {
		t.Fatal("missing password file accepted")
	}
	cfg.KafkaSASLPasswordFile = filepath.Join(dir, "empty")
	if err := os.WriteFile(cfg.KafkaSASLPasswordFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.KafkaConn(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty password file: %v", err)
	}
	cfg.KafkaSASLPasswordFile = filepath.Join(dir, "pw")
	if err := os.WriteFile(cfg.KafkaSASLPasswordFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conn, err = cfg.KafkaConn()
	if p, ok := conn.SASL.(plain.Mechanism); err != nil || !ok || p.Username != "samla" || p.Password != "s3cret" {
		t.Fatalf("PLAIN: %+v, %v", conn, err)
	}
}
