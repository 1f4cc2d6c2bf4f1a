"""`gpuctl gpu-types`' sharing column: how a unit of each type shares its GPU (capacity and
free count units)."""

from gpuctl.commands.catalogue import gpu_type_sharing


def test_the_sharing_column_says_the_part_of_a_gpu_and_its_physical_type():
    assert gpu_type_sharing({"sharing": "exclusive", "gpu_fraction_text": "1"}) == "exclusive"
    assert gpu_type_sharing({"sharing": "time-sliced", "gpu_fraction_text": "1/4",
                             "physical": "t4"}) == "time-sliced 1/4 of t4"
    assert gpu_type_sharing({"sharing": "mig", "gpu_fraction_text": "1/7",
                             "physical": None}) == "mig 1/7"
    # a type claimed through DRA: a whole GPU, or a MIG device of one
    assert gpu_type_sharing({"sharing": "dra", "gpu_fraction_text": "1"}) == "dra"
    assert gpu_type_sharing({"sharing": "dra", "gpu_fraction_text": "1/7",
                             "physical": "a100"}) == "dra 1/7 of a100"
    # a MIG profile of a partitionable GPU, claimed through DRA
    assert gpu_type_sharing({"sharing": "dra", "gpu_fraction_text": "3/7",
                             "mig_profile": "3g.40gb"}) == "dra 3g.40gb, 3/7"
    assert gpu_type_sharing({}) == "exclusive"  # an older portal's rows
