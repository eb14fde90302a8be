#!/usr/bin/env bash
# Fetches what the test Neo4j needs (Neo4j 5.26 community and the Maven plugins)
# into the local Maven repository and builds the launcher, so that tests can
# start it offline. Needs Java 17+ and Maven 3.8+.
set -euo pipefail
cd "$(dirname "$0")"
command -v java >/dev/null || { echo "test/neo4j: java not found; install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "test/neo4j: mvn not found; install Maven (Debian: apt-get install maven)" >&2; exit 1; }
mvn -q -B package
echo "test/neo4j: launcher built in $(pwd)/target"
