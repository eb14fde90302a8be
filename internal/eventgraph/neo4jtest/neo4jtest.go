// Package neo4jtest gives tests a real Neo4j: Neo4j community 5.26 in-process
// in a small Java program (test/neo4j), built with Maven and started once per
// test binary, Bolt on a free loopback port, authentication on.
//
// It never skips: without Java 17+ and Maven the tests fail with what to
// install. test/neo4j/prepare.sh fetches everything beforehand, so that tests
// build the launcher offline.
package neo4jtest // import "github.com/loom-otel/loom/internal/eventgraph/neo4jtest"

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"
)

// Username is the user the server authenticates.
const Username = "neo4j"

// startTimeout bounds the JVM start and Neo4j's recovery of an empty store.
const startTimeout = 3 * time.Minute

// Server is a running test Neo4j.
type Server struct {
	URI      string // bolt://127.0.0.1:<port>
	Password string
	// Started is how long the start took, launcher build excluded.
	Started time.Duration

	cmd   *exec.Cmd
	stdin *os.File // closing it stops the server
}

var (
	shared    *Server
	sharedErr error
	once      sync.Once
)

// Shared returns the test binary's server, starting it on first use. The
// server stops when the test binary exits (its standard input closes).
func Shared(tb testing.TB) *Server {
	tb.Helper()
	once.Do(func() {
		shared, sharedErr = Start()
	})
	if sharedErr != nil {
		tb.Fatalf("neo4jtest: %v", sharedErr)
	}
	return shared
}

// Start builds the launcher when needed and starts a server.
func Start() (*Server, error) {
	dir, err := launcherDir()
	if err != nil {
		return nil, err
	}
	if err := build(dir); err != nil {
		return nil, err
	}
	password := make([]byte, 12)
	if _, err := rand.Read(password); err != nil {
		return nil, err
	}
	s := &Server{Password: hex.EncodeToString(password)}

	// Only *os.File streams: exec starts no copying goroutines, which goleak would report.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stderr, err := os.CreateTemp("", "loom-neo4j-*.log")
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command("java", "-Xms256m", "-Xmx1g", "-XX:+UseSerialGC",
		"-cp", filepath.Join(dir, "target", "classes")+string(os.PathListSeparator)+filepath.Join(dir, "target", "lib", "*"),
		"loom.neo4jtest.Launcher", s.Password)
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = stdinR, stdoutW, stderr
	// The server keeps writing to its own handle of the log; ours is only read on failure.
	defer func() { _ = os.Remove(stderr.Name()) }()
	defer func() { _ = stderr.Close() }()
	began := time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start java: %w", err)
	}
	_ = stdinR.Close()
	_ = stdoutW.Close()
	s.stdin = stdinW

	if err := stdoutR.SetReadDeadline(time.Now().Add(startTimeout)); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdoutR).ReadString('\n')
	_ = stdoutR.Close()
	if err != nil || !strings.HasPrefix(line, "bolt://") {
		s.Stop()
		log, _ := os.ReadFile(stderr.Name())
		return nil, fmt.Errorf("the test Neo4j did not start within %v (%w); its output:\n%s", startTimeout, err, tail(log, 4000))
	}
	s.URI = strings.TrimSpace(line)
	s.Started = time.Since(began)
	return s, nil
}

// Stop stops the server and waits for it to exit.
func (s *Server) Stop() {
	if s.stdin == nil {
		return
	}
	_ = s.stdin.Close()
	s.stdin = nil
	_ = s.cmd.Wait()
}

// Driver returns a driver for the server, closed when the test ends.
func (s *Server) Driver(tb testing.TB) neo4j.DriverWithContext {
	tb.Helper()
	d, err := neo4j.NewDriverWithContext(s.URI, neo4j.BasicAuth(Username, s.Password, ""))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

// Clear deletes every node and edge, so that a test starts from an empty graph
// (community edition has one user database, shared by the tests of a binary).
func (s *Server) Clear(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	session := s.Driver(tb).NewSession(ctx, neo4j.SessionConfig{AccessMode: neo4j.AccessModeWrite})
	defer func() { _ = session.Close(ctx) }()
	// CALL IN TRANSACTIONS needs an implicit transaction: session.Run, not a transaction function.
	res, err := session.Run(ctx, `MATCH (n) CALL { WITH n DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS`, nil)
	if err == nil {
		_, err = res.Consume(ctx)
	}
	if err != nil {
		tb.Fatalf("neo4jtest: clear: %v", err)
	}
}

// Count runs a Cypher query that returns one integer.
func (s *Server) Count(tb testing.TB, query string, params map[string]any) int64 {
	tb.Helper()
	res, err := neo4j.ExecuteQuery(context.Background(), s.Driver(tb), query, params, neo4j.EagerResultTransformer)
	if err != nil {
		tb.Fatalf("neo4jtest: %s: %v", query, err)
	}
	if len(res.Records) != 1 || len(res.Records[0].Values) != 1 {
		tb.Fatalf("neo4jtest: %s: want one value, got %v", query, res.Records)
	}
	n, ok := res.Records[0].Values[0].(int64)
	if !ok {
		tb.Fatalf("neo4jtest: %s: want an integer, got %T", query, res.Records[0].Values[0])
	}
	return n
}

// launcherDir finds test/neo4j from the working directory (a package directory).
func launcherDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		candidate := filepath.Join(dir, "test", "neo4j", "pom.xml")
		if _, err := os.Stat(candidate); err == nil {
			return filepath.Dir(candidate), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("test/neo4j/pom.xml not found above the working directory")
		}
		dir = parent
	}
}

// build compiles the launcher unless its classes and libraries are newer than
// its sources: offline from the local Maven repository, else online. A file
// lock keeps the test binaries that start at once from building together.
func build(dir string) error {
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: the tests need a real Neo4j, which needs a JDK 17+ and Maven "+
				"(Debian: apt-get install openjdk-17-jdk-headless maven), then run test/neo4j/prepare.sh", tool)
		}
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "loom-neo4j-build.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()

	if fresh(dir) {
		return nil
	}
	var out []byte
	for _, args := range [][]string{{"-q", "-B", "-o", "package"}, {"-q", "-B", "package"}} {
		cmd := exec.Command("mvn", args...)
		cmd.Dir = dir
		out, err = cmd.CombinedOutput()
		if err == nil {
			// Maven leaves unchanged classes alone: mark the build as newer than its sources.
			now := time.Now()
			return os.Chtimes(filepath.Join(dir, launcherClass), now, now)
		}
	}
	return fmt.Errorf("build the Neo4j launcher (mvn package in %s): %w\n%s", dir, err, tail(out, 4000))
}

const launcherClass = "target/classes/loom/neo4jtest/Launcher.class"

// fresh reports whether the built launcher is newer than its pom and source.
func fresh(dir string) bool {
	built, err := os.Stat(filepath.Join(dir, launcherClass))
	if err != nil {
		return false
	}
	if _, err := os.Stat(filepath.Join(dir, "target", "lib")); err != nil {
		return false
	}
	for _, src := range []string{"pom.xml", filepath.Join("src", "main", "java", "loom", "neo4jtest", "Launcher.java")} {
		info, err := os.Stat(filepath.Join(dir, src))
		if err != nil || info.ModTime().After(built.ModTime()) {
			return false
		}
	}
	return true
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
