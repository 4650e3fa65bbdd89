// An event as the store tests commit it (the store fills in seq and the hashes).
#ifndef CARVE_TESTS_ADAPTERS_STORED_EVENT_H_
#define CARVE_TESTS_ADAPTERS_STORED_EVENT_H_

#include <string>

#include "ports/store.h"

namespace carve::testing_store {

inline StoredEvent Event(const std::string& subject) {
  StoredEvent e;
  e.time_us = 1'700'000'000'000'000;
  e.actor = "scheduler";
  e.type = "job.submitted";
  e.subject = subject;
  e.reason = "because the test says so";
  e.details_json = R"({"n":1})";
  return e;
}

}  // namespace carve::testing_store

#endif  // CARVE_TESTS_ADAPTERS_STORED_EVENT_H_
