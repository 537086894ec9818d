import Foundation
import Testing
@testable import DocStore

@Suite struct AggregateSmokeTests {
    @Test func aggregatesGroupsProjectionAndUpdates() async throws {
        let (store, dir) = try await makeStore()
        _ = dir
        try await store.write { ctx in
            for i in 0..<100 {
                try ctx.insert(Person(name: "p\(i)", age: i % 50, city: ["Oslo", "Bergen", "Tromsø"][i % 3],
                                      email: i % 4 == 0 ? nil : "p\(i)@x", tags: i % 2 == 0 ? ["a"] : []))
            }
        }
        let total = try await Person.query().sum(\.age, in: store)
        #expect(total == (0..<100).reduce(0) { $0 + $1 % 50 })
        let mean = try await Person.include(#Predicate { $0.city == "Oslo" }).average(\.age, in: store)
        print("mean", mean as Any)
        #expect(try await Person.query().max(\.age, in: store) == 49)
        #expect(try await Person.query().min(\.age, in: store) == 0)
        #expect(try await Person.query().distinct(\.city, in: store) == ["Bergen", "Oslo", "Tromsø"])
        let perCity = try await Person.query().groupBy(\.city).count(in: store)
        #expect(perCity.map(\.value) == [33, 34, 33])
        let top = try await Person.query().groupBy(\.city).count().sortBy(.value, order: .reverse)[0..<1].results(in: store)
        #expect(top.first?.key == "Oslo")
        let ages = try await Person.query().groupBy(\.city).average(\.age, in: store)
        print(ages)
        let explain = try await Person.query().groupBy(\.city).count().explain(in: store)
        print(explain)
        print(try await Person.query().explain(aggregate: .max("age"), in: store))
        print(try await Person.include(#Predicate { $0.age >= 10 && $0.age < 15 }).explain(aggregate: .average("age"), in: store))
        let names = try await Person.include(#Predicate { $0.age > 47 }).select(\.name, \.age).results(in: store)
        print(names)
        let moved = try await Person.include(#Predicate { $0.city == "Oslo" }).update(in: store) { $0.city = "Bergen" }
        #expect(moved == 34)
        let n2 = try await Query<DocumentValue>("people").include(.compare("city", .equal, .string("Bergen")))
            .update(in: store, set: ["city": .string("Oslo")], increment: ["age": .int(1)])
        #expect(n2 == 67)
        #expect(try await Person.query().max(\.age, in: store) == 50)
        let report = try await store.verify()
        #expect(report.isClean)
    }
}
