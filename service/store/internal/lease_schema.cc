// The tables and functions through which evoscaled replicas on one PostgreSQL database share
// its studies (study_leases.h):
//  - replicas: one row per running replica (its address, and until when its heartbeat holds);
//    a live replica also holds the session advisory lock (kReplicaLockClass, id), which
//    PostgreSQL releases the moment the replica's connection ends (its process died).
//  - study_leases: each study's owner and epoch (the fencing token). A row is never deleted
//    and its epoch never goes down: an owner that lets go sets owner to NULL.
//  - evoscale_fence(study, epoch): in a write's own transaction, holds the lease row (FOR
//    SHARE, so a takeover waits for the write to commit) or raises kLeaseLostSqlstate.
//  - evoscale_acquire(study, me): takes the lease when it is free, when its owner's heartbeat
//    has expired (a hung replica), or when its owner's advisory lock is free (a dead one),
//    with the epoch one up; answers the live owner's id and address otherwise.
#include "service/store/internal/postgres.h"

namespace evoscale::service::internal {
namespace {

// Two-key advisory locks are a namespace apart from the one-key migration lock.
// 1702260595 is "evos"; the second key is the replica's id.
constexpr const char* kLeaseMigrations[] = {
    // 0 -> 1
    R"sql(
    CREATE TABLE replicas(
      id BIGSERIAL PRIMARY KEY,
      address TEXT NOT NULL,
      started_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
      expires_at TIMESTAMPTZ NOT NULL);
    CREATE TABLE study_leases(
      study_id BIGINT PRIMARY KEY,
      owner BIGINT,
      epoch BIGINT NOT NULL CHECK (epoch > 0));
    CREATE INDEX study_leases_by_owner ON study_leases(owner);

    CREATE FUNCTION evoscale_fence(s BIGINT, e BIGINT) RETURNS VOID AS $$
    BEGIN
      PERFORM 1 FROM study_leases WHERE study_id = s AND epoch = e FOR SHARE;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'study % was taken over by another replica (this one''s lease, epoch %, is over)', s, e
          USING ERRCODE = 'EV001';
      END IF;
    END $$ LANGUAGE plpgsql;

    CREATE FUNCTION evoscale_acquire(s BIGINT, me BIGINT,
                                     OUT epoch BIGINT, OUT holder BIGINT, OUT address TEXT) AS $$
    DECLARE
      cur_owner BIGINT;
      cur_epoch BIGINT;
      live BOOLEAN;
    BEGIN
      LOOP
        SELECT l.owner, l.epoch INTO cur_owner, cur_epoch
          FROM study_leases l WHERE l.study_id = s FOR UPDATE;
        IF NOT FOUND THEN
          INSERT INTO study_leases(study_id, owner, epoch) VALUES (s, me, 1)
            ON CONFLICT (study_id) DO NOTHING;
          IF FOUND THEN
            epoch := 1; holder := me; RETURN;
          END IF;
          CONTINUE;  -- another replica inserted it first: read it again
        END IF;
        IF cur_owner = me THEN
          epoch := cur_epoch; holder := me; RETURN;
        END IF;
        live := NULL;
        address := NULL;
        IF cur_owner IS NOT NULL THEN
          SELECT r.expires_at > clock_timestamp(), r.address INTO live, address
            FROM replicas r WHERE r.id = cur_owner;
        END IF;
        IF cur_owner IS NULL OR live IS NOT TRUE OR
           pg_try_advisory_xact_lock(1702260595, (cur_owner % 2147483647)::INT4) THEN
          UPDATE study_leases SET owner = me, epoch = cur_epoch + 1 WHERE study_id = s;
          epoch := cur_epoch + 1; holder := me; address := NULL; RETURN;
        END IF;
        epoch := 0; holder := cur_owner; RETURN;
      END LOOP;
    END $$ LANGUAGE plpgsql;
    )sql",
};

}  // namespace

absl::Status MigrateLeaseSchema(PgConnection& conn) {
  return MigratePostgres(conn, "leases", kLeaseMigrations).status();
}

}  // namespace evoscale::service::internal
