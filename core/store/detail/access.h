#pragma once
// The store's own way to a TuningDb's connection: for its read queries (queries.cpp) and its
// merge (merge.cpp), which run their SQL on the same connection. Code outside core/store/
// never includes this header; it uses TuningDb's methods.
#include <sqlite3.h>

#include "core/store/tuning_db.h"

namespace brickdl::store::detail {

class StoreAccess {
public:
  static sqlite3* connection(TuningDb& db) { return db.db_; }
};

} // namespace brickdl::store::detail
