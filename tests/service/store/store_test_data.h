// The study store tests' data: a study, a trial, and SQL run behind a store's back.
#ifndef EVOSCALE_TESTS_SERVICE_STORE_STORE_TEST_DATA_H_
#define EVOSCALE_TESTS_SERVICE_STORE_STORE_TEST_DATA_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "evoscale/v1/study.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace evoscale::service {

template <typename M>
inline M ParseText(const std::string& text) {
  M m;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &m)) << text;
  return m;
}

inline v1::Study DemoStudy() {
  return ParseText<v1::Study>(R"pb(
    display_name: "demo"
    state: ACTIVE
    spec {
      metrics { name: "loss" goal: MINIMIZE }
      parameters {
        name: "x"
        double_spec { min: 0 max: 1 }
      }
      max_trials: 10
    }
    create_time { seconds: 1700000000 }
  )pb");
}

inline v1::Trial DemoTrial(int64_t id, v1::Trial::State state) {
  v1::Trial t = ParseText<v1::Trial>(R"pb(
    parameters { name: "x" double_value: 0.25 }
    client_id: "worker-1"
  )pb");
  t.set_id(id);
  t.set_state(state);
  if (state == v1::Trial::SUCCEEDED)
    (*t.mutable_final_measurement()->mutable_metrics())["loss"] = 0.5;
  return t;
}

// Runs one statement on its own connection (as another process would).
inline void ExecSql(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK) << path;
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

}  // namespace evoscale::service

#endif  // EVOSCALE_TESTS_SERVICE_STORE_STORE_TEST_DATA_H_
